package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/tlog"
)

// Test-only hooks of the audit repositories: they exist only in this
// package's test binary, where storetest finds them through its Tamperer
// and RetentionTamperer interfaces.

// tamperable are the columns a tamper test may rewrite.
var tamperable = map[string]bool{
	"tenant": true, "log_index": true, "chain": true, "seq": true, "id": true, "time_ms": true, "tool": true,
	"principal": true, "outcome": true, "phase": true, "session_id": true, "call_id": true,
	"decision_id": true, "hash": true,
}

// TamperRaw overwrites the stored raw JSON of event id.
func (s *sqliteAudit) TamperRaw(ctx context.Context, id string, raw []byte) error {
	return s.tamper(ctx, `UPDATE audit_events SET raw = ? WHERE id = ?`, string(raw), id)
}

// TamperColumn overwrites one indexed column of event id.
func (s *sqliteAudit) TamperColumn(ctx context.Context, id, column string, value any) error {
	if !tamperable[column] {
		return fmt.Errorf("tamper: unknown column %q", column)
	}
	return s.tamper(ctx, `UPDATE audit_events SET `+column+` = ? WHERE id = ?`, value, id)
}

// TamperDelete removes event id.
func (s *sqliteAudit) TamperDelete(ctx context.Context, id string) error {
	return s.tamper(ctx, `DELETE FROM audit_events WHERE id = ?`, id)
}

func (s *sqliteAudit) tamper(ctx context.Context, q string, args ...any) error {
	res, err := s.w.ExecContext(ctx, q, args...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("tamper: %d rows affected", n)
	}
	return nil
}

// ExplainQuery returns SQLite's plan for the page query of f.
func (s *sqliteAudit) ExplainQuery(ctx context.Context, tenant string, f audit.Filter) (string, error) {
	q, args, err := sqliteQuery(tenant, f)
	if err != nil {
		return "", err
	}
	rows, err := s.r.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, notused sql.NullInt64
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			return "", err
		}
		lines = append(lines, detail)
	}
	return strings.Join(lines, "\n"), rows.Err()
}

// PlanIndexes lists the indexes a Filter field should use, for the plan test.
var PlanIndexes = map[string]string{
	"":            "audit_events_time",
	"tool":        "audit_events_tool",
	"principal":   "audit_events_principal",
	"outcome":     "audit_events_outcome",
	"phase":       "audit_events_phase",
	"session_id":  "audit_events_session_id",
	"call_id":     "audit_events_call_id",
	"decision_id": "audit_events_decision_id",
}

// TamperSchemaVersion records a schema version this binary does not know.
func (s *sqliteAudit) TamperSchemaVersion(ctx context.Context, v int) error {
	return s.tamper(ctx, `INSERT INTO `+versionTable+` (version_id, is_applied) VALUES (?, 1)`, v)
}

// WriterPragmas reports the durability settings of the write connection.
func (s *sqliteAudit) WriterPragmas(ctx context.Context) (journal string, synchronous int, err error) {
	if err := s.w.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&journal); err != nil {
		return "", 0, err
	}
	err = s.w.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&synchronous)
	return journal, synchronous, err
}

// ReaderIsQueryOnly reports whether a pooled read connection refuses writes.
func (s *sqliteAudit) ReaderIsQueryOnly(ctx context.Context) (bool, error) {
	var on int
	err := s.r.QueryRowContext(ctx, `PRAGMA query_only`).Scan(&on)
	return on == 1, err
}

// TamperRaw overwrites the stored raw JSON of event id.
func (s *pgAudit) TamperRaw(ctx context.Context, id string, raw []byte) error {
	return s.tamper(ctx, `UPDATE audit_events SET raw = $1 WHERE id = $2`, raw, id)
}

// TamperColumn overwrites one indexed column of event id.
func (s *pgAudit) TamperColumn(ctx context.Context, id, column string, value any) error {
	if !tamperable[column] {
		return fmt.Errorf("tamper: unknown column %q", column)
	}
	return s.tamper(ctx, `UPDATE audit_events SET `+column+` = $1 WHERE id = $2`, value, id)
}

// TamperDelete removes event id.
func (s *pgAudit) TamperDelete(ctx context.Context, id string) error {
	return s.tamper(ctx, `DELETE FROM audit_events WHERE id = $1`, id)
}

func (s *pgAudit) tamper(ctx context.Context, q string, args ...any) error {
	tag, err := s.pool.Exec(ctx, q, args...)
	if err != nil {
		return err
	}
	if n := tag.RowsAffected(); n != 1 {
		return fmt.Errorf("tamper: %d rows affected", n)
	}
	return nil
}

// TamperSchemaVersion records a schema version this binary does not know.
func (s *pgAudit) TamperSchemaVersion(ctx context.Context, v int) error {
	return s.tamper(ctx, `INSERT INTO `+versionTable+` (version_id, is_applied) VALUES ($1, true)`, v)
}

// ExplainQuery returns PostgreSQL's plan for the page query of f, as the
// store runs it (a prepared statement with parameters).
func (s *pgAudit) ExplainQuery(ctx context.Context, tenant string, f audit.Filter) (string, error) {
	q, args, err := postgresQuery(tenant, f)
	if err != nil {
		return "", err
	}
	rows, err := s.pool.Query(ctx, "EXPLAIN "+q, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n"), rows.Err()
}

// Analyze refreshes the planner statistics of the events table.
func (s *pgAudit) Analyze(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `ANALYZE audit_events`)
	return err
}

// SetPruneBatch bounds the events one prune step deletes.
func (s *sqliteAudit) SetPruneBatch(n int) { s.pruneBatch = n }

// SetPruneBatch bounds the events one prune step deletes.
func (s *pgAudit) SetPruneBatch(n int) { s.pruneBatch = n }

// TamperTree replaces the tenant's stored tree and all its nodes.
func (s *sqliteAudit) TamperTree(ctx context.Context, tenant string, size int64, state, root []byte, nodes []tlog.Node) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DELETE FROM audit_tree_nodes WHERE tenant = ?`, tenant); err != nil {
		return err
	}
	for _, n := range nodes {
		if _, err := tx.ExecContext(ctx, `INSERT INTO audit_tree_nodes (tenant, level, idx, hash) VALUES (?, ?, ?, ?)`,
			tenant, int64(n.ID.Level), int64(n.ID.Index), n.Hash); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE audit_trees SET size = ?, state = ?, root = ? WHERE tenant = ?`, size, state, root, tenant); err != nil {
		return err
	}
	return tx.Commit()
}

// TamperCheckpointNote replaces (nil: deletes) the stored latest checkpoint.
func (s *sqliteAudit) TamperCheckpointNote(ctx context.Context, tenant string, note []byte, size int64) error {
	return s.tamper(ctx, `UPDATE audit_trees SET checkpoint = ?, checkpoint_size = ? WHERE tenant = ?`, note, size, tenant)
}

// TamperDeleteTenant deletes the tenant's events, tree and nodes.
func (s *sqliteAudit) TamperDeleteTenant(ctx context.Context, tenant string) error {
	for _, q := range []string{`DELETE FROM audit_events WHERE tenant = ?`, `DELETE FROM audit_trees WHERE tenant = ?`,
		`DELETE FROM audit_tree_nodes WHERE tenant = ?`} {
		if _, err := s.w.ExecContext(ctx, q, tenant); err != nil {
			return err
		}
	}
	return nil
}

// InsertLegacy stores an event as the previous gateway did.
func (s *sqliteAudit) InsertLegacy(ctx context.Context, ev *audit.Event, raw []byte) error {
	ms, err := audit.TimeMS(ev)
	if err != nil {
		return err
	}
	return s.tamper(ctx, `INSERT INTO audit_events
		(tenant, chain, seq, id, time_ms, tool, principal, outcome, phase, session_id, call_id, decision_id, hash, raw)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, ev.Tenant, ev.Chain, ev.Seq, ev.ID, ms, ev.Tool, ev.Principal,
		ev.Outcome, ev.Phase, ev.SessionID, ev.CallID, ev.DecisionID, ev.Hash, string(raw))
}

// TamperTree replaces the tenant's stored tree and all its nodes.
func (s *pgAudit) TamperTree(ctx context.Context, tenant string, size int64, state, root []byte, nodes []tlog.Node) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `DELETE FROM audit_tree_nodes WHERE tenant = $1`, tenant); err != nil {
		return err
	}
	for _, n := range nodes {
		if _, err := tx.Exec(ctx, `INSERT INTO audit_tree_nodes (tenant, level, idx, hash) VALUES ($1, $2, $3, $4)`,
			tenant, int16(n.ID.Level), int64(n.ID.Index), n.Hash); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE audit_trees SET size = $1, state = $2, root = $3 WHERE tenant = $4`, size, state, root, tenant); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// TamperCheckpointNote replaces (nil: deletes) the stored latest checkpoint.
func (s *pgAudit) TamperCheckpointNote(ctx context.Context, tenant string, note []byte, size int64) error {
	return s.tamper(ctx, `UPDATE audit_trees SET checkpoint = $1, checkpoint_size = $2 WHERE tenant = $3`, note, size, tenant)
}

// TamperDeleteTenant deletes the tenant's events, tree and nodes.
func (s *pgAudit) TamperDeleteTenant(ctx context.Context, tenant string) error {
	for _, q := range []string{`DELETE FROM audit_events WHERE tenant = $1`, `DELETE FROM audit_trees WHERE tenant = $1`,
		`DELETE FROM audit_tree_nodes WHERE tenant = $1`} {
		if _, err := s.pool.Exec(ctx, q, tenant); err != nil {
			return err
		}
	}
	return nil
}

// InsertLegacy stores an event as the previous gateway did.
func (s *pgAudit) InsertLegacy(ctx context.Context, ev *audit.Event, raw []byte) error {
	ms, err := audit.TimeMS(ev)
	if err != nil {
		return err
	}
	return s.tamper(ctx, `INSERT INTO audit_events
		(tenant, chain, seq, id, time_ms, tool, principal, outcome, phase, session_id, call_id, decision_id, hash, raw)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`, ev.Tenant, ev.Chain, ev.Seq, ev.ID, ms,
		ev.Tool, ev.Principal, ev.Outcome, ev.Phase, ev.SessionID, ev.CallID, ev.DecisionID, ev.Hash, raw)
}
