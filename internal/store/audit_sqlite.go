package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
)

// sqliteAudit is the embedded audit.Store, on the database's writer
// connection and read pool (see sqlite.go).
type sqliteAudit struct {
	w, r   *sql.DB
	insert *sql.Stmt // on w; nil when read-only
	// pruneBatch overrides audit.PruneBatch (tests walk several steps
	// with it).
	pruneBatch int64
}

var _ audit.Store = (*sqliteAudit)(nil)

func newSQLiteAudit(ctx context.Context, w, r *sql.DB, readOnly bool) (*sqliteAudit, error) {
	s := &sqliteAudit{w: w, r: r}
	if readOnly {
		return s, nil
	}
	var err error
	s.insert, err = w.PrepareContext(ctx, `INSERT INTO audit_events
		(tenant, chain, seq, id, time_ms, tool, principal, outcome, phase, session_id, call_id, decision_id, hash, raw)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	return s, err
}

func (s *sqliteAudit) close() error {
	if s.insert == nil {
		return nil
	}
	return s.insert.Close()
}

// Insert implements audit.Store: one IMMEDIATE transaction, all rows and
// their records or none.
func (s *sqliteAudit) Insert(ctx context.Context, entries []audit.Entry) error {
	if s.insert == nil {
		return errReadOnly
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt := tx.StmtContext(ctx, s.insert)
	for _, e := range entries {
		ev := e.Event
		ms, err := ev.TimeMS()
		if err != nil {
			return err
		}
		if _, err := stmt.ExecContext(ctx, ev.Tenant, ev.Chain, ev.Seq, ev.ID, ms, ev.Tool, ev.Principal,
			ev.Outcome, ev.Phase, ev.SessionID, ev.CallID, ev.DecisionID, ev.Hash, string(e.Raw)); err != nil {
			return err
		}
	}
	if err := insertRecords(entries, func(q string, args ...any) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	}, false); err != nil {
		return err
	}
	return tx.Commit()
}

// Heads implements audit.Store. It walks the distinct tenants with a recursive
// skip scan of the (tenant, chain, seq) index, then takes each tenant's
// highest seq: O(tenants · log n), not a scan of the table.
func (s *sqliteAudit) Heads(ctx context.Context, chain string) (map[string]audit.Head, error) {
	rows, err := s.w.QueryContext(ctx, `
		WITH RECURSIVE tenants(tenant) AS (
			SELECT min(tenant) FROM audit_events
			UNION ALL
			SELECT (SELECT min(tenant) FROM audit_events WHERE tenant > tenants.tenant)
			FROM tenants WHERE tenants.tenant IS NOT NULL
		)
		SELECT e.tenant, e.seq, e.hash
		FROM tenants JOIN audit_events e ON e.tenant = tenants.tenant AND e.chain = ?
		WHERE e.seq = (SELECT max(seq) FROM audit_events m WHERE m.tenant = tenants.tenant AND m.chain = ?)`,
		chain, chain)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	heads := map[string]audit.Head{}
	for rows.Next() {
		var t string
		var h audit.Head
		if err := rows.Scan(&t, &h.Seq, &h.Hash); err != nil {
			return nil, err
		}
		heads[t] = h
	}
	return heads, rows.Err()
}

// Query implements audit.Store.
func (s *sqliteAudit) Query(ctx context.Context, tenant string, f audit.Filter) (audit.Page, error) {
	q, args, err := sqliteQuery(tenant, f)
	if err != nil {
		return audit.Page{}, err
	}
	f, _ = f.Normalize()
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return audit.Page{}, err
	}
	defer rows.Close()
	var page audit.Page
	var last audit.Position
	for rows.Next() {
		if len(page.Events) == f.Limit {
			page.NextCursor = audit.EncodeCursor(tenant, f, last)
			break
		}
		var raw []byte
		if err := rows.Scan(&last.TimeMS, &last.ID, &raw); err != nil {
			return audit.Page{}, err
		}
		ev, err := audit.DecodeEvent(raw)
		if err != nil {
			return audit.Page{}, err
		}
		page.Events = append(page.Events, ev)
	}
	if err := rows.Err(); err != nil {
		return audit.Page{}, err
	}
	return page, nil
}

// sqliteQuery builds the page query: equality filters, inclusive time
// bounds, the keyset position after the cursor, newest first, one row more
// than the limit to know whether a next page exists.
func sqliteQuery(tenant string, f audit.Filter) (string, []any, error) {
	f, err := f.Normalize()
	if err != nil {
		return "", nil, err
	}
	pos, hasPos, err := audit.DecodeCursor(tenant, f)
	if err != nil {
		return "", nil, err
	}
	var b strings.Builder
	b.WriteString("SELECT time_ms, id, raw FROM audit_events WHERE tenant = ?")
	args := []any{tenant}
	for _, c := range []struct{ col, val string }{
		{"tool", f.Tool}, {"principal", f.Principal}, {"outcome", f.Outcome}, {"phase", f.Phase},
		{"session_id", f.SessionID}, {"call_id", f.CallID}, {"decision_id", f.DecisionID},
	} {
		if c.val != "" {
			b.WriteString(" AND " + c.col + " = ?")
			args = append(args, c.val)
		}
	}
	if ms, ok := f.FromMS(); ok {
		b.WriteString(" AND time_ms >= ?")
		args = append(args, ms)
	}
	if ms, ok := f.ToMS(); ok {
		b.WriteString(" AND time_ms <= ?")
		args = append(args, ms)
	}
	if hasPos {
		b.WriteString(" AND (time_ms, id) < (?, ?)")
		args = append(args, pos.TimeMS, pos.ID)
	}
	b.WriteString(" ORDER BY time_ms DESC, id DESC LIMIT ?")
	args = append(args, f.Limit+1)
	return b.String(), args, nil
}

// Get implements audit.Store.
func (s *sqliteAudit) Get(ctx context.Context, tenant, id string) (*audit.Event, error) {
	var raw []byte
	err := s.r.QueryRowContext(ctx, `SELECT raw FROM audit_events WHERE id = ? AND tenant = ?`, id, tenant).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, audit.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return audit.DecodeEvent(raw)
}

// Scan implements audit.Store. It reads in one transaction, so it sees one
// snapshot even while the writer commits.
func (s *sqliteAudit) Scan(ctx context.Context, tenant string, fn func(audit.Row) error) error {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT raw, tenant, chain, seq, id, time_ms, tool, principal, outcome,
		phase, session_id, call_id, decision_id, hash
		FROM audit_events WHERE tenant = ? ORDER BY chain, seq`, tenant)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r audit.Row
		if err := rows.Scan(&r.Raw, &r.Tenant, &r.Chain, &r.Seq, &r.ID, &r.TimeMS, &r.Tool, &r.Principal,
			&r.Outcome, &r.Phase, &r.SessionID, &r.CallID, &r.DecisionID, &r.Hash); err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Ping implements audit.Store.
func (s *sqliteAudit) Ping(ctx context.Context) error {
	var one int
	return s.r.QueryRowContext(ctx, `SELECT 1 FROM `+versionTable+` LIMIT 1`).Scan(&one)
}

// Probe implements audit.Store: an upsert of the probe row, committed on
// the writer connection like a batch.
func (s *sqliteAudit) Probe(ctx context.Context) error {
	if s.insert == nil {
		return errReadOnly
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO store_probe (id, probed_ms) VALUES (1, ?)
		ON CONFLICT (id) DO UPDATE SET probed_ms = excluded.probed_ms`, time.Now().UnixMilli())
	return err
}
