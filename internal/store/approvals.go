package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/approval"
)

// approvals is the approval.Store over database/sql, shared by SQLite and
// PostgreSQL: the statements differ only in their placeholders. Every
// transition is one conditional UPDATE … RETURNING, atomic in both. Writes
// go through w, reads through r (on PostgreSQL both are the one pool).
type approvals struct {
	w, r   *sql.DB
	dollar bool // $1 placeholders (PostgreSQL) instead of ?
}

var _ approval.Store = (*approvals)(nil)

const approvalColumns = `id, tenant, call_id, principal, tool, status, created_ms, expires_ms, decided_by, decided_ms, comment, outcome, request, result`

// q rewrites ? placeholders for the dialect.
func (s *approvals) q(query string) string { return placeholders(query, s.dollar) }

// placeholders rewrites the ? placeholders of query as $1, $2, … when
// dollar is set (PostgreSQL).
func placeholders(query string, dollar bool) string {
	if !dollar {
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

// scanner is *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanApproval(sc scanner) (*approval.Approval, error) {
	var r approvalRow
	if err := sc.Scan(&r.id, &r.tenant, &r.callID, &r.principal, &r.tool, &r.status, &r.createdMS, &r.expiresMS,
		&r.decidedBy, &r.decidedMS, &r.comment, &r.outcome, &r.request, &r.result); err != nil {
		return nil, err
	}
	return r.approval()
}

func (s *approvals) Create(ctx context.Context, a *approval.Approval) error {
	q, args, err := insertApproval(a, s.dollar)
	if err != nil {
		return err
	}
	if _, err := s.w.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("approval: create: %w", err)
	}
	return nil
}

func (s *approvals) Get(ctx context.Context, tenant, id string) (*approval.Approval, error) {
	a, err := scanApproval(s.r.QueryRowContext(ctx, s.q(`SELECT `+approvalColumns+` FROM approvals WHERE tenant = ? AND id = ?`), tenant, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, approval.ErrNotFound
	}
	return a, err
}

func (s *approvals) ByCall(ctx context.Context, tenant, callID string) (*approval.Approval, error) {
	a, err := scanApproval(s.r.QueryRowContext(ctx, s.q(`SELECT `+approvalColumns+` FROM approvals
		WHERE tenant = ? AND call_id = ? ORDER BY created_ms DESC, id DESC LIMIT 1`), tenant, callID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, approval.ErrNotFound
	}
	return a, err
}

func (s *approvals) List(ctx context.Context, tenant string, f approval.Filter) ([]*approval.Approval, error) {
	query := `SELECT ` + approvalColumns + ` FROM approvals WHERE tenant = ?`
	args := []any{tenant}
	if f.Status != "" {
		query += ` AND status = ?`
		args = append(args, f.Status)
	}
	query += ` ORDER BY created_ms DESC, id DESC LIMIT ?`
	args = append(args, f.PageSize())
	return s.many(ctx, s.r, query, args...)
}

func (s *approvals) many(ctx context.Context, db *sql.DB, query string, args ...any) ([]*approval.Approval, error) {
	rows, err := db.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, fmt.Errorf("approval: query: %w", err)
	}
	defer rows.Close()
	out := []*approval.Approval{}
	for rows.Next() {
		a, err := scanApproval(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

func (s *approvals) Decide(ctx context.Context, tenant, id string, d approval.Decision) (*approval.Approval, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	a, err := scanApproval(s.w.QueryRowContext(ctx, s.q(`UPDATE approvals SET status = ?, decided_by = ?, decided_ms = ?, comment = ?
		WHERE tenant = ? AND id = ? AND status = 'pending' AND expires_ms > ?
		RETURNING `+approvalColumns), d.Status, d.By, d.At.UnixMilli(), d.Comment, tenant, id, d.At.UnixMilli()))
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
	if cur.Status != approval.StatusPending {
		return cur, approval.ErrNotPending
	}
	return cur, approval.ErrExpired
}

func (s *approvals) Expire(ctx context.Context, tenant string, now time.Time) ([]*approval.Approval, error) {
	return s.many(ctx, s.w, `UPDATE approvals SET status = 'expired', decided_ms = ?
		WHERE tenant = ? AND status = 'pending' AND expires_ms <= ?
		RETURNING `+approvalColumns, now.UnixMilli(), tenant, now.UnixMilli())
}

func (s *approvals) Finish(ctx context.Context, tenant, id, outcome string, r approval.Result) error {
	if outcome == "" {
		return errors.New("approval: finish needs an outcome")
	}
	res, err := encodeResult(r)
	if err != nil {
		return err
	}
	n, err := s.w.ExecContext(ctx, s.q(`UPDATE approvals SET outcome = ?, result = ?
		WHERE tenant = ? AND id = ? AND status = 'approved' AND outcome = ''`), outcome, res, tenant, id)
	if err != nil {
		return fmt.Errorf("approval: finish: %w", err)
	}
	if k, err := n.RowsAffected(); err != nil || k != 1 {
		return approval.ErrFinished
	}
	return nil
}

func (s *approvals) Pending(ctx context.Context, tenant string, now time.Time) (int, error) {
	var n int
	ms := now.UnixMilli()
	err := s.r.QueryRowContext(ctx, s.q(`SELECT
		(SELECT count(*) FROM approvals WHERE tenant = ? AND status = 'pending' AND expires_ms > ?) +
		(SELECT count(*) FROM questions WHERE tenant = ? AND status = 'pending' AND expires_ms > ?)`),
		tenant, ms, tenant, ms).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("approval: pending: %w", err)
	}
	return n, nil
}
