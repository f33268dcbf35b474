package audit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PostgresStore is the Store for several gateway replicas sharing one
// PostgreSQL database. Each replica writes its own chain segment (see
// LogOptions.Chain), so their inserts never touch the same rows and never
// wait on each other; a batch is one INSERT statement, hence one
// transaction. Queries, Get and Scan read from the same pool.
//
// Durability is PostgreSQL's: a batch is durable on return as long as the
// server's synchronous_commit is on (the default) or stronger.
type PostgresStore struct {
	pool         *pgxpool.Pool
	writeTimeout time.Duration
	closeOnce    sync.Once
	// pruneBatch overrides pruneBatch (tests walk several steps with it).
	pruneBatch int64
}

var _ Store = (*PostgresStore)(nil)

// PostgresOption tunes OpenPostgres.
type PostgresOption func(*postgresConfig)

// defaultConnectTimeout bounds connecting when the DSN does not.
const defaultConnectTimeout = 5 * time.Second

type postgresConfig struct {
	maxConns       int32
	connectTimeout time.Duration
	writeTimeout   time.Duration
	migrate        bool
}

// WithMaxConns bounds the connection pool (default: pgxpool's, the larger
// of 4 and the number of CPUs, unless the DSN sets pool_max_conns).
func WithMaxConns(n int32) PostgresOption {
	return func(c *postgresConfig) {
		if n > 0 {
			c.maxConns = n
		}
	}
}

// WithConnectTimeout bounds establishing one connection when the DSN sets
// no connect_timeout (default 5s).
func WithConnectTimeout(d time.Duration) PostgresOption {
	return func(c *postgresConfig) {
		if d > 0 {
			c.connectTimeout = d
		}
	}
}

// WithWriteTimeout bounds one Insert or Heads call (default 10s). The Log
// writes with a context that never ends, so without a bound a server that
// stopped answering, rather than refusing, would stall every append; past
// it the batch fails with ErrUnavailable and the Log reloads its heads.
func WithWriteTimeout(d time.Duration) PostgresOption {
	return func(c *postgresConfig) {
		if d > 0 {
			c.writeTimeout = d
		}
	}
}

// WithoutMigrations makes OpenPostgres check that the schema is current
// instead of migrating it, for a gateway whose database role may not
// change the schema: run MigratePostgres (`gateway audit migrate`) with a
// role that may.
func WithoutMigrations() PostgresOption {
	return func(c *postgresConfig) { c.migrate = false }
}

// OpenPostgres connects to the database named by dsn (a postgres:// URL or
// a keyword/value string, as libpq takes them; the tables go into the
// first schema of its search_path) and brings the audit schema up to date,
// under an advisory lock, so that replicas starting together migrate once.
func OpenPostgres(ctx context.Context, dsn string, opts ...PostgresOption) (*PostgresStore, error) {
	cfg := postgresConfig{connectTimeout: defaultConnectTimeout, writeTimeout: 10 * time.Second, migrate: true}
	for _, o := range opts {
		o(&cfg)
	}
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message may quote the DSN, password included.
		return nil, errors.New("audit: postgres dsn does not parse")
	}
	if cfg.maxConns > 0 {
		pcfg.MaxConns = cfg.maxConns
	}
	if pcfg.ConnConfig.ConnectTimeout == 0 {
		pcfg.ConnConfig.ConnectTimeout = cfg.connectTimeout
	}
	if _, ok := pcfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		pcfg.ConnConfig.RuntimeParams["application_name"] = "toolgate"
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("audit: open postgres: %w", err)
	}
	if cfg.migrate {
		_, err = migratePostgres(ctx, pool)
	} else {
		err = checkPostgresSchema(ctx, pool)
	}
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("audit: open postgres: %w", err)
	}
	return &PostgresStore{pool: pool, writeTimeout: cfg.writeTimeout}, nil
}

// pgInsert inserts a batch as one statement: one array parameter per
// column, unnested into rows. One round trip and one cached plan whatever
// the batch size, and atomic without an explicit transaction.
const pgInsert = `INSERT INTO audit_events
	(tenant, chain, seq, id, time_ms, tool, principal, outcome, phase, session_id, call_id, decision_id, hash, raw)
	SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::bigint[], $6::text[], $7::text[],
		$8::text[], $9::text[], $10::text[], $11::text[], $12::text[], $13::text[], $14::bytea[])`

// Insert implements Store: one statement, all rows or none.
func (s *PostgresStore) Insert(ctx context.Context, events []*Event, raw [][]byte) error {
	if len(events) != len(raw) {
		return errors.New("audit: insert: events and raw differ in length")
	}
	if len(events) == 0 {
		return nil
	}
	n := len(events)
	var (
		tenant, chain, id, tool, principal = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		outcome, phase, session, call      = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		decision, hash                     = make([]string, n), make([]string, n)
		seq, timeMS                        = make([]int64, n), make([]int64, n)
	)
	for i, ev := range events {
		ms, err := eventTimeMS(ev)
		if err != nil {
			return err
		}
		tenant[i], chain[i], seq[i], id[i], timeMS[i] = ev.Tenant, ev.Chain, ev.Seq, ev.ID, ms
		tool[i], principal[i], outcome[i], phase[i] = ev.Tool, ev.Principal, ev.Outcome, ev.Phase
		session[i], call[i], decision[i], hash[i] = ev.SessionID, ev.CallID, ev.DecisionID, ev.Hash
	}
	ctx, cancel := context.WithTimeout(ctx, s.writeTimeout)
	defer cancel()
	_, err := s.pool.Exec(ctx, pgInsert, tenant, chain, seq, id, timeMS, tool, principal,
		outcome, phase, session, call, decision, hash, raw)
	return err
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

// Heads implements Store.
func (s *PostgresStore) Heads(ctx context.Context, chain string) (map[string]Head, error) {
	ctx, cancel := context.WithTimeout(ctx, s.writeTimeout)
	defer cancel()
	rows, err := s.pool.Query(ctx, pgHeads, chain)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	heads := map[string]Head{}
	for rows.Next() {
		var t string
		var h Head
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

// Query implements Store.
func (s *PostgresStore) Query(ctx context.Context, tenant string, f Filter) (Page, error) {
	q, args, err := postgresQuery(tenant, f)
	if err != nil {
		return Page{}, err
	}
	f, _ = f.Normalize()
	if hasNUL(tenant, f.Tool, f.Principal, f.Outcome, f.Phase, f.SessionID, f.CallID, f.DecisionID) {
		return Page{}, nil
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return Page{}, err
	}
	defer rows.Close()
	var page Page
	var last Position
	for rows.Next() {
		if len(page.Events) == f.Limit {
			page.NextCursor = EncodeCursor(tenant, f, last)
			break
		}
		var raw pgtype.DriverBytes // valid until Next: decodeEvent copies
		if err := rows.Scan(&last.TimeMS, &last.ID, &raw); err != nil {
			return Page{}, err
		}
		ev, err := decodeEvent(raw)
		if err != nil {
			return Page{}, err
		}
		page.Events = append(page.Events, ev)
	}
	if err := rows.Err(); err != nil {
		return Page{}, err
	}
	return page, nil
}

// postgresQuery builds the page query; see sqliteQuery, whose shape it
// shares so that both stores use their indexes the same way.
func postgresQuery(tenant string, f Filter) (string, []any, error) {
	f, err := f.Normalize()
	if err != nil {
		return "", nil, err
	}
	pos, hasPos, err := DecodeCursor(tenant, f)
	if err != nil {
		return "", nil, err
	}
	if hasNUL(pos.ID) { // no event id holds one: a forged cursor
		return "", nil, ErrBadCursor
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

// Get implements Store.
func (s *PostgresStore) Get(ctx context.Context, tenant, id string) (*Event, error) {
	if hasNUL(tenant, id) {
		return nil, ErrNotFound
	}
	var raw []byte
	err := s.pool.QueryRow(ctx, `SELECT raw FROM audit_events WHERE id = $1 AND tenant = $2`, id, tenant).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return decodeEvent(raw)
}

// Scan implements Store. It is one statement, so it reads one snapshot
// while replicas keep committing, and it streams: rows arrive as fn
// consumes them, whatever the tenant's size.
func (s *PostgresStore) Scan(ctx context.Context, tenant string, fn func(Row) error) error {
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
		var r Row
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

// Ping implements Store: the server answers and the schema is there.
func (s *PostgresStore) Ping(ctx context.Context) error {
	var one int
	return s.pool.QueryRow(ctx, `SELECT 1 FROM `+pgMigrationsTable+` LIMIT 1`).Scan(&one)
}

// Close implements Store; it is idempotent. It waits for connections in
// use to be released.
func (s *PostgresStore) Close() error {
	s.closeOnce.Do(s.pool.Close)
	return nil
}
