package audit

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// Test-only hooks: they exist only in this package's test binary, where
// storetest finds them through its Tamperer interface.

// tamperable are the columns a tamper test may rewrite.
var tamperable = map[string]bool{
	"tenant": true, "chain": true, "seq": true, "id": true, "time_ms": true, "tool": true,
	"principal": true, "outcome": true, "phase": true, "session_id": true, "call_id": true,
	"decision_id": true, "hash": true,
}

// TamperRaw overwrites the stored raw JSON of event id.
func (s *SQLiteStore) TamperRaw(ctx context.Context, id string, raw []byte) error {
	return s.tamper(ctx, `UPDATE audit_events SET raw = ? WHERE id = ?`, string(raw), id)
}

// TamperColumn overwrites one indexed column of event id.
func (s *SQLiteStore) TamperColumn(ctx context.Context, id, column string, value any) error {
	if !tamperable[column] {
		return fmt.Errorf("tamper: unknown column %q", column)
	}
	return s.tamper(ctx, `UPDATE audit_events SET `+column+` = ? WHERE id = ?`, value, id)
}

// TamperDelete removes event id.
func (s *SQLiteStore) TamperDelete(ctx context.Context, id string) error {
	return s.tamper(ctx, `DELETE FROM audit_events WHERE id = ?`, id)
}

func (s *SQLiteStore) tamper(ctx context.Context, q string, args ...any) error {
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
func (s *SQLiteStore) ExplainQuery(ctx context.Context, tenant string, f Filter) (string, error) {
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
func (s *SQLiteStore) TamperSchemaVersion(ctx context.Context, v int) error {
	return s.tamper(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'future', '')`, v)
}

// WriterPragmas reports the durability settings of the write connection.
func (s *SQLiteStore) WriterPragmas(ctx context.Context) (journal string, synchronous int, err error) {
	if err := s.w.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&journal); err != nil {
		return "", 0, err
	}
	err = s.w.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&synchronous)
	return journal, synchronous, err
}

// ReaderIsQueryOnly reports whether a pooled read connection refuses writes.
func (s *SQLiteStore) ReaderIsQueryOnly(ctx context.Context) (bool, error) {
	var on int
	err := s.r.QueryRowContext(ctx, `PRAGMA query_only`).Scan(&on)
	return on == 1, err
}
