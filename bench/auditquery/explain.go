package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/toolgate/toolgate/internal/audit"
)

// pageSQL rebuilds the page query the stores run (internal/audit's
// sqliteQuery / postgresQuery are unexported; this mirrors them clause by
// clause), with ? or $n placeholders.
func pageSQL(tenant string, f audit.Filter, dollar bool) (string, []any, error) {
	f, err := f.Normalize()
	if err != nil {
		return "", nil, err
	}
	pos, hasPos, err := audit.DecodeCursor(tenant, f)
	if err != nil {
		return "", nil, err
	}
	args := []any{tenant}
	arg := func(v any) string {
		args = append(args, v)
		if dollar {
			return "$" + strconv.Itoa(len(args))
		}
		return "?"
	}
	var b strings.Builder
	b.WriteString("SELECT time_ms, id, raw FROM audit_events WHERE tenant = ")
	if dollar {
		b.WriteString("$1")
	} else {
		b.WriteString("?")
	}
	for _, c := range []struct{ col, val string }{
		{"tool", f.Tool}, {"principal", f.Principal}, {"outcome", f.Outcome}, {"phase", f.Phase},
		{"session_id", f.SessionID}, {"call_id", f.CallID}, {"decision_id", f.DecisionID},
	} {
		if c.val != "" {
			b.WriteString(" AND " + c.col + " = " + arg(c.val))
		}
	}
	if ms, ok := f.FromMS(); ok {
		b.WriteString(" AND time_ms >= " + arg(ms))
	}
	if ms, ok := f.ToMS(); ok {
		b.WriteString(" AND time_ms <= " + arg(ms))
	}
	if hasPos {
		b.WriteString(" AND (time_ms, id) < (" + arg(pos.TimeMS) + ", " + arg(pos.ID) + ")")
	}
	b.WriteString(" ORDER BY time_ms DESC, id DESC LIMIT " + arg(int64(f.Limit+1)))
	return b.String(), args, nil
}

// inline renders q with its arguments substituted, for the report.
func inline(q string, args []any, dollar bool) string {
	lit := func(v any) string {
		if s, ok := v.(string); ok {
			return "'" + strings.ReplaceAll(s, "'", "''") + "'"
		}
		return fmt.Sprint(v)
	}
	if dollar {
		for i := len(args); i >= 1; i-- {
			q = strings.ReplaceAll(q, "$"+strconv.Itoa(i), lit(args[i-1]))
		}
		return q
	}
	for _, a := range args {
		q = strings.Replace(q, "?", lit(a), 1)
	}
	return q
}

// explainSQLite returns EXPLAIN QUERY PLAN of f's page query.
func explainSQLite(ctx context.Context, db *sql.DB, tenant string, f audit.Filter) (string, error) {
	q, args, err := pageSQL(tenant, f, false)
	if err != nil {
		return "", err
	}
	rows, err := db.QueryContext(ctx, "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var b strings.Builder
	b.WriteString(inline(q, args, false) + "\n")
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			return "", err
		}
		b.WriteString("  " + detail + "\n")
	}
	return b.String(), rows.Err()
}

// explainPostgres returns EXPLAIN (ANALYZE, BUFFERS) of f's page query.
func explainPostgres(ctx context.Context, conn *pgx.Conn, tenant string, f audit.Filter) (string, error) {
	q, args, err := pageSQL(tenant, f, true)
	if err != nil {
		return "", err
	}
	rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+q, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var b strings.Builder
	b.WriteString(inline(q, args, true) + "\n")
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		b.WriteString("  " + line + "\n")
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	rows.Close()
	// Lookups by call or decision also read the append table.
	if f.CallID != "" || f.DecisionID != "" {
		col, val := "call_id", f.CallID
		if val == "" {
			col, val = "decision_id", f.DecisionID
		}
		pq := `SELECT raw FROM audit_append WHERE tenant = $1 AND ` + col + ` = $2`
		prows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+pq, tenant, val)
		if err != nil {
			return "", err
		}
		defer prows.Close()
		b.WriteString(pq + "\n")
		for prows.Next() {
			var line string
			if err := prows.Scan(&line); err != nil {
				return "", err
			}
			b.WriteString("  " + line + "\n")
		}
		return b.String(), prows.Err()
	}
	return b.String(), nil
}
