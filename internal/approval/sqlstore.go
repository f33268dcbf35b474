package approval

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// sqlStore is the Store over database/sql, shared by SQLite and
// PostgreSQL: the statements differ only in their placeholders. Every
// transition is one conditional UPDATE … RETURNING, atomic in both.
type sqlStore struct {
	db        *sql.DB
	dollar    bool // $1 placeholders (PostgreSQL) instead of ?
	closeOnce sync.Once
	closeErr  error
}

const columns = `id, tenant, call_id, principal, tool, status, created_ms, expires_ms, decided_by, decided_ms, comment, outcome, request, result`

// q rewrites ? placeholders for the dialect.
func (s *sqlStore) q(query string) string {
	if !s.dollar {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

type scanner interface{ Scan(dest ...any) error }

func scanRow(sc scanner) (*Approval, error) {
	var r row
	if err := sc.Scan(&r.id, &r.tenant, &r.callID, &r.principal, &r.tool, &r.status, &r.createdMS, &r.expiresMS,
		&r.decidedBy, &r.decidedMS, &r.comment, &r.outcome, &r.request, &r.result); err != nil {
		return nil, err
	}
	return r.approval()
}

func (s *sqlStore) Create(ctx context.Context, a *Approval) error {
	if a.ID == "" || a.Tenant == "" {
		return errors.New("approval: id and tenant are required")
	}
	req, err := encodeRequest(a)
	if err != nil {
		return err
	}
	_, err = s.db.ExecContext(ctx, s.q(`INSERT INTO approvals (id, tenant, call_id, principal, tool, status, created_ms, expires_ms, request)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`),
		a.ID, a.Tenant, a.CallID, a.Principal, a.Tool, StatusPending, a.CreatedAt.UnixMilli(), a.ExpiresAt.UnixMilli(), req)
	if err != nil {
		return fmt.Errorf("approval: create: %w", err)
	}
	return nil
}

func (s *sqlStore) Get(ctx context.Context, tenant, id string) (*Approval, error) {
	a, err := scanRow(s.db.QueryRowContext(ctx, s.q(`SELECT `+columns+` FROM approvals WHERE tenant = ? AND id = ?`), tenant, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return a, err
}

func (s *sqlStore) ByCall(ctx context.Context, tenant, callID string) (*Approval, error) {
	a, err := scanRow(s.db.QueryRowContext(ctx, s.q(`SELECT `+columns+` FROM approvals
		WHERE tenant = ? AND call_id = ? ORDER BY created_ms DESC, id DESC LIMIT 1`), tenant, callID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	return a, err
}

func (s *sqlStore) List(ctx context.Context, tenant string, f Filter) ([]*Approval, error) {
	query := `SELECT ` + columns + ` FROM approvals WHERE tenant = ?`
	args := []any{tenant}
	if f.Status != "" {
		query += ` AND status = ?`
		args = append(args, f.Status)
	}
	query += ` ORDER BY created_ms DESC, id DESC LIMIT ?`
	args = append(args, limitOf(f))
	return s.many(ctx, query, args...)
}

func (s *sqlStore) many(ctx context.Context, query string, args ...any) ([]*Approval, error) {
	rows, err := s.db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("approval: query: %w", err)
	}
	defer rows.Close()
	out := []*Approval{}
	for rows.Next() {
		a, err := scanRow(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

func (s *sqlStore) Decide(ctx context.Context, tenant, id string, d Decision) (*Approval, error) {
	if err := validDecision(d); err != nil {
		return nil, err
	}
	a, err := scanRow(s.db.QueryRowContext(ctx, s.q(`UPDATE approvals SET status = ?, decided_by = ?, decided_ms = ?, comment = ?
		WHERE tenant = ? AND id = ? AND status = 'pending' AND expires_ms > ?
		RETURNING `+columns), d.Status, d.By, d.At.UnixMilli(), d.Comment, tenant, id, d.At.UnixMilli()))
	if err == nil {
		return a, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("approval: decide: %w", err)
	}
	// Nothing moved: say why.
	cur, err := s.Get(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	if cur.Status != StatusPending {
		return cur, ErrNotPending
	}
	return cur, ErrExpired
}

func (s *sqlStore) Expire(ctx context.Context, tenant string, now time.Time) ([]*Approval, error) {
	return s.many(ctx, `UPDATE approvals SET status = 'expired', decided_ms = ?
		WHERE tenant = ? AND status = 'pending' AND expires_ms <= ?
		RETURNING `+columns, now.UnixMilli(), tenant, now.UnixMilli())
}

func (s *sqlStore) Finish(ctx context.Context, tenant, id, outcome string, r Result) error {
	if outcome == "" {
		return errors.New("approval: finish needs an outcome")
	}
	res, err := encodeResult(r)
	if err != nil {
		return err
	}
	n, err := s.db.ExecContext(ctx, s.q(`UPDATE approvals SET outcome = ?, result = ?
		WHERE tenant = ? AND id = ? AND status = 'approved' AND outcome = ''`), outcome, res, tenant, id)
	if err != nil {
		return fmt.Errorf("approval: finish: %w", err)
	}
	if k, err := n.RowsAffected(); err != nil || k != 1 {
		return ErrFinished
	}
	return nil
}

func (s *sqlStore) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.db.Close() })
	return s.closeErr
}
