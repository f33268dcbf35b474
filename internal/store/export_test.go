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
// and RetentionTamperer interfaces. They are written once, on auditStore,
// for both databases.

// tamperable are the columns a tamper test may rewrite.
var tamperable = map[string]bool{
	"tenant": true, "log_index": true, "chain": true, "seq": true, "id": true, "time_ms": true, "tool": true,
	"principal": true, "outcome": true, "phase": true, "session_id": true, "call_id": true,
	"decision_id": true, "hash": true,
}

// q rewrites ? placeholders for the dialect.
func (s *auditStore) q(query string) string { return placeholders(query, s.d.dollar) }

// rawArg is raw JSON as the store writes it into audit_events: TEXT on
// SQLite, BYTEA on PostgreSQL.
func (s *auditStore) rawArg(raw []byte) any {
	if s.d.dollar {
		return raw
	}
	return string(raw)
}

// TamperRaw overwrites the stored raw JSON of event id.
func (s *auditStore) TamperRaw(ctx context.Context, id string, raw []byte) error {
	return s.tamper(ctx, `UPDATE audit_events SET raw = ? WHERE id = ?`, s.rawArg(raw), id)
}

// TamperColumn overwrites one indexed column of event id.
func (s *auditStore) TamperColumn(ctx context.Context, id, column string, value any) error {
	if !tamperable[column] {
		return fmt.Errorf("tamper: unknown column %q", column)
	}
	return s.tamper(ctx, `UPDATE audit_events SET `+column+` = ? WHERE id = ?`, value, id)
}

// TamperDelete removes event id.
func (s *auditStore) TamperDelete(ctx context.Context, id string) error {
	return s.tamper(ctx, `DELETE FROM audit_events WHERE id = ?`, id)
}

func (s *auditStore) tamper(ctx context.Context, q string, args ...any) error {
	res, err := s.w.ExecContext(ctx, s.q(q), args...)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("tamper: %d rows affected", n)
	}
	return nil
}

// ExplainQuery returns the database's plan for the page query of f, as
// the store runs it (with parameters).
func (s *auditStore) ExplainQuery(ctx context.Context, tenant string, f audit.Filter) (string, error) {
	q, args, err := s.pageQuery(tenant, f)
	if err != nil {
		return "", err
	}
	explain := "EXPLAIN QUERY PLAN "
	if s.d.dollar {
		explain = "EXPLAIN "
	}
	rows, err := s.r.QueryContext(ctx, explain+q, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	var lines []string
	for rows.Next() {
		// SQLite: id, parent, notused, detail; PostgreSQL: one line.
		dest := make([]any, len(cols))
		for i := range dest {
			dest[i] = new(sql.NullString)
		}
		if err := rows.Scan(dest...); err != nil {
			return "", err
		}
		lines = append(lines, dest[len(dest)-1].(*sql.NullString).String)
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
func (s *auditStore) TamperSchemaVersion(ctx context.Context, v int) error {
	return s.tamper(ctx, `INSERT INTO `+versionTable+` (version_id, is_applied) VALUES (?, true)`, v)
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

// Analyze refreshes the planner statistics of the events table.
func (s *pgAudit) Analyze(ctx context.Context) error {
	_, err := s.w.ExecContext(ctx, `ANALYZE audit_events`)
	return err
}

// SetPruneBatch bounds the events one prune step deletes.
func (s *auditStore) SetPruneBatch(n int) { s.pruneBatch = n }

// TamperTree replaces the tenant's stored tree and all its nodes.
func (s *auditStore) TamperTree(ctx context.Context, tenant string, size int64, state, root []byte, nodes []tlog.Node) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, s.q(`DELETE FROM audit_tree_nodes WHERE tenant = ?`), tenant); err != nil {
		return err
	}
	for _, n := range nodes {
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO audit_tree_nodes (tenant, level, idx, hash) VALUES (?, ?, ?, ?)`),
			tenant, int64(n.ID.Level), int64(n.ID.Index), n.Hash); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, s.q(`UPDATE audit_trees SET size = ?, state = ?, root = ? WHERE tenant = ?`), size, state, root, tenant); err != nil {
		return err
	}
	return tx.Commit()
}

// TamperCheckpointNote replaces (nil: deletes) the stored latest checkpoint.
func (s *auditStore) TamperCheckpointNote(ctx context.Context, tenant string, note []byte, size int64) error {
	return s.tamper(ctx, `UPDATE audit_trees SET checkpoint = ?, checkpoint_size = ? WHERE tenant = ?`, note, size, tenant)
}

// TamperDeleteTenant deletes the tenant's events, tree and nodes.
func (s *auditStore) TamperDeleteTenant(ctx context.Context, tenant string) error {
	for _, q := range []string{`DELETE FROM audit_events WHERE tenant = ?`, `DELETE FROM audit_trees WHERE tenant = ?`,
		`DELETE FROM audit_tree_nodes WHERE tenant = ?`} {
		if _, err := s.w.ExecContext(ctx, s.q(q), tenant); err != nil {
			return err
		}
	}
	return nil
}

// InsertLegacy stores an event as the previous gateway did.
func (s *auditStore) InsertLegacy(ctx context.Context, ev *audit.Event, raw []byte) error {
	ms, err := audit.TimeMS(ev)
	if err != nil {
		return err
	}
	return s.tamper(ctx, `INSERT INTO audit_events
		(tenant, chain, seq, id, time_ms, tool, principal, outcome, phase, session_id, call_id, decision_id, hash, raw)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, ev.Tenant, ev.Chain, ev.Seq, ev.ID, ms, ev.Tool, ev.Principal,
		ev.Outcome, ev.Phase, ev.SessionID, ev.CallID, ev.DecisionID, ev.Hash, s.rawArg(raw))
}
