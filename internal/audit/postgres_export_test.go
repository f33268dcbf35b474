package audit

import (
	"context"
	"fmt"
	"strings"
)

// Test-only hooks of the PostgreSQL store: they exist only in this
// package's test binary, where storetest finds them through its Tamperer
// interface.

// TamperRaw overwrites the stored raw JSON of event id.
func (s *PostgresStore) TamperRaw(ctx context.Context, id string, raw []byte) error {
	return s.tamper(ctx, `UPDATE audit_events SET raw = $1 WHERE id = $2`, raw, id)
}

// TamperColumn overwrites one indexed column of event id.
func (s *PostgresStore) TamperColumn(ctx context.Context, id, column string, value any) error {
	if !tamperable[column] {
		return fmt.Errorf("tamper: unknown column %q", column)
	}
	return s.tamper(ctx, `UPDATE audit_events SET `+column+` = $1 WHERE id = $2`, value, id)
}

// TamperDelete removes event id.
func (s *PostgresStore) TamperDelete(ctx context.Context, id string) error {
	return s.tamper(ctx, `DELETE FROM audit_events WHERE id = $1`, id)
}

func (s *PostgresStore) tamper(ctx context.Context, q string, args ...any) error {
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
func (s *PostgresStore) TamperSchemaVersion(ctx context.Context, v int) error {
	return s.tamper(ctx, `INSERT INTO `+pgMigrationsTable+` (version, name) VALUES ($1, 'future')`, v)
}

// ExplainQuery returns PostgreSQL's plan for the page query of f, as the
// store runs it (a prepared statement with parameters).
func (s *PostgresStore) ExplainQuery(ctx context.Context, tenant string, f Filter) (string, error) {
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
func (s *PostgresStore) Analyze(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `ANALYZE audit_events`)
	return err
}
