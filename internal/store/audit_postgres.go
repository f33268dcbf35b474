package store

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolgate/toolgate/internal/audit"
)

// pgAudit is the audit.Store for several gateway replicas sharing one
// PostgreSQL database. Each replica writes its own chain segment (see
// audit.LogOptions.Chain), so their inserts never touch the same rows and
// never wait on each other; a batch is one INSERT statement, hence one
// transaction (an explicit one when it carries records). Queries, Get and
// Scan read from the same pool.
//
// Durability is PostgreSQL's: a batch is durable on return as long as the
// server's synchronous_commit is on (the default) or stronger.
type pgAudit struct {
	pool         *pgxpool.Pool
	writeTimeout time.Duration
	// pruneBatch overrides audit.PruneBatch (tests walk several steps
	// with it).
	pruneBatch int64
}

var _ audit.Store = (*pgAudit)(nil)

// pgInsert inserts a batch as one statement: one array parameter per
// column, unnested into rows. One round trip and one cached plan whatever
// the batch size, and atomic without an explicit transaction.
const pgInsert = `INSERT INTO audit_events
	(tenant, chain, seq, id, time_ms, tool, principal, outcome, phase, session_id, call_id, decision_id, hash, raw)
	SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::bigint[], $6::text[], $7::text[],
		$8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::bytea[])`

// Insert implements audit.Store: one statement, all rows or none, in an
// explicit transaction with the entries' records when there are any.
func (s *pgAudit) Insert(ctx context.Context, entries []audit.Entry) error {
	if len(entries) == 0 {
		return nil
	}
	n := len(entries)
	var (
		tenant, chain, id, tool, principal = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		outcome, phase, session, call      = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		decision, hash                     = make([]string, n), make([]string, n)
		seq, timeMS                        = make([]int64, n), make([]int64, n)
		raw                                = make([][]byte, n)
		records                            bool
	)
	for i, e := range entries {
		ev := e.Event
		ms, err := ev.TimeMS()
		if err != nil {
			return err
		}
		tenant[i], chain[i], seq[i], id[i], timeMS[i] = ev.Tenant, ev.Chain, ev.Seq, ev.ID, ms
		tool[i], principal[i], outcome[i], phase[i] = ev.Tool, ev.Principal, ev.Outcome, ev.Phase
		session[i], call[i], decision[i], hash[i] = ev.SessionID, ev.CallID, ev.DecisionID, ev.Hash
		raw[i] = e.Raw
		records = records || e.Record != nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.writeTimeout)
	defer cancel()
	args := []any{tenant, chain, seq, id, timeMS, tool, principal, outcome, phase, session, call, decision, hash, raw}
	if !records {
		_, err := s.pool.Exec(ctx, pgInsert, args...)
		return err
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, pgInsert, args...); err != nil {
		return err
	}
	if err := insertRecords(entries, func(q string, args ...any) error {
		_, err := tx.Exec(ctx, q, args...)
		return err
	}, true); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

// pgHeads walks the distinct tenants with a recursive skip scan of the
// (tenant, chain, seq) index (PostgreSQL has no skip scan of its own), then
// reads each tenant's last link of the chain backwards from the same index:
// O(tenants · log n), not a scan of the table.
const pgHeads = `
	WITH RECURSIVE tenants(tenant) AS (
		SELECT min(tenant) FROM audit_events
		UNION ALL
		SELECT (SELECT min(e.tenant) FROM audit_events e WHERE e.tenant > t.tenant)
		FROM tenants t WHERE t.tenant IS NOT NULL
	)
	SELECT h.tenant, h.seq, h.hash
	FROM tenants t CROSS JOIN LATERAL (
		SELECT e.tenant, e.seq, e.hash FROM audit_events e
		WHERE e.tenant = t.tenant AND e.chain = $1
		ORDER BY e.seq DESC LIMIT 1
	) h`

// Heads implements audit.Store.
func (s *pgAudit) Heads(ctx context.Context, chain string) (map[string]audit.Head, error) {
	ctx, cancel := context.WithTimeout(ctx, s.writeTimeout)
	defer cancel()
	rows, err := s.pool.Query(ctx, pgHeads, chain)
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

// hasNUL reports whether any of ss holds a NUL character, which no
// PostgreSQL text value can: such a value matches no stored event, and
// sending it would fail the statement instead.
func hasNUL(ss ...string) bool {
	for _, s := range ss {
		if strings.IndexByte(s, 0) >= 0 {
			return true
		}
	}
	return false
}

// Query implements audit.Store.
func (s *pgAudit) Query(ctx context.Context, tenant string, f audit.Filter) (audit.Page, error) {
	q, args, err := postgresQuery(tenant, f)
	if err != nil {
		return audit.Page{}, err
	}
	f, _ = f.Normalize()
	if hasNUL(tenant, f.Tool, f.Principal, f.Outcome, f.Phase, f.SessionID, f.CallID, f.DecisionID) {
		return audit.Page{}, nil
	}
	rows, err := s.pool.Query(ctx, q, args...)
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
		var raw pgtype.DriverBytes // valid until Next: decodeEvent copies
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

// postgresQuery builds the page query; see sqliteQuery, whose shape it
// shares so that both stores use their indexes the same way.
func postgresQuery(tenant string, f audit.Filter) (string, []any, error) {
	f, err := f.Normalize()
	if err != nil {
		return "", nil, err
	}
	pos, hasPos, err := audit.DecodeCursor(tenant, f)
	if err != nil {
		return "", nil, err
	}
	if hasNUL(pos.ID) { // no event id holds one: a forged cursor
		return "", nil, audit.ErrBadCursor
	}
	var b strings.Builder
	args := []any{tenant}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	b.WriteString("SELECT time_ms, id, raw FROM audit_events WHERE tenant = $1")
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
		// A row comparison, so that the position is one index condition.
		b.WriteString(" AND (time_ms, id) < (" + arg(pos.TimeMS) + ", " + arg(pos.ID) + ")")
	}
	b.WriteString(" ORDER BY time_ms DESC, id DESC LIMIT " + arg(int64(f.Limit+1)))
	return b.String(), args, nil
}

// Get implements audit.Store.
func (s *pgAudit) Get(ctx context.Context, tenant, id string) (*audit.Event, error) {
	if hasNUL(tenant, id) {
		return nil, audit.ErrNotFound
	}
	var raw []byte
	err := s.pool.QueryRow(ctx, `SELECT raw FROM audit_events WHERE id = $1 AND tenant = $2`, id, tenant).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, audit.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return audit.DecodeEvent(raw)
}

// Scan implements audit.Store. It is one statement, so it reads one snapshot
// while replicas keep committing, and it streams: rows arrive as fn
// consumes them, whatever the tenant's size.
func (s *pgAudit) Scan(ctx context.Context, tenant string, fn func(audit.Row) error) error {
	if hasNUL(tenant) {
		return nil
	}
	rows, err := s.pool.Query(ctx, `SELECT raw, tenant, chain, seq, id, time_ms, tool, principal, outcome,
		phase, session_id, call_id, decision_id, hash
		FROM audit_events WHERE tenant = $1 ORDER BY chain, seq`, tenant)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r audit.Row
		var raw pgtype.DriverBytes // Row.Raw is only valid during fn
		if err := rows.Scan(&raw, &r.Tenant, &r.Chain, &r.Seq, &r.ID, &r.TimeMS, &r.Tool, &r.Principal,
			&r.Outcome, &r.Phase, &r.SessionID, &r.CallID, &r.DecisionID, &r.Hash); err != nil {
			return err
		}
		r.Raw = raw
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Ping implements audit.Store: the server answers and the schema is there.
func (s *pgAudit) Ping(ctx context.Context) error {
	var one int
	return s.pool.QueryRow(ctx, `SELECT 1 FROM `+versionTable+` LIMIT 1`).Scan(&one)
}

// Probe implements audit.Store: an upsert of the probe row, committed like
// a batch.
func (s *pgAudit) Probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.writeTimeout)
	defer cancel()
	_, err := s.pool.Exec(ctx, `INSERT INTO store_probe (id, probed_ms) VALUES (1, $1)
		ON CONFLICT (id) DO UPDATE SET probed_ms = excluded.probed_ms`, time.Now().UnixMilli())
	return err
}
