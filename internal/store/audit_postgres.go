package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/tlog"
)

// pgAudit is the audit.Store for any number of identical gateway replicas
// sharing one PostgreSQL database. The hot path (Insert) adds rows to
// audit_append, keyed (tenant, seq) with seq from an identity: replicas
// never contend on a row or a chain head. A batch is one INSERT statement,
// hence one transaction (an explicit one when it carries records).
//
// Each tenant's tree has one integrator at a time, elected per
// transaction by a transaction-scoped advisory lock on the tenant: any
// replica's integrator may take it, the others skip the tenant (or, when
// asked to wait, queue behind it). Queries, Get and Scan read from the same
// pool.
//
// Durability is PostgreSQL's: a batch is durable on return as long as the
// server's synchronous_commit is on (the default) or stronger.
type pgAudit struct {
	pool         *pgxpool.Pool
	writeTimeout time.Duration
	// moved counts the rows this store's integrators moved out of the
	// append table since it was last vacuumed.
	moved atomic.Int64
	// pruneBatch overrides audit.PruneBatch (tests walk several steps
	// with it).
	pruneBatch int
}

var _ audit.Store = (*pgAudit)(nil)

// pgTreeLockKey names the advisory lock of one tenant's tree, with the
// schema and tenant appended: one integrator (or prune) per tenant across
// all replicas.
const pgTreeLockKey = "toolgate/audit/tree/"

// pgInsert inserts a batch as one statement: one array parameter per
// column, unnested into rows. One round trip and one cached plan whatever
// the batch size, and atomic without an explicit transaction.
const pgInsert = `INSERT INTO audit_append (tenant, id, call_id, decision_id, raw)
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bytea[])`

// PruneBatch tells the audit log the prune step (tests shrink it).
func (s *pgAudit) PruneBatch() int { return s.pruneBatch }

// vacuumEvery is how many rows the integrators of one store move out of
// the append table between two vacuums of it.
const vacuumEvery = 20000

// Moved is told by the audit log how many rows were moved out of the
// append table. Every vacuumEvery rows it vacuums the table: lookups by
// call_id and decision_id scan the tenant's rows, dead ones included, and
// autovacuum looks only once a minute. A role that may not vacuum (not
// the table's owner) is left to autovacuum.
func (s *pgAudit) Moved(ctx context.Context, n int) {
	if s.moved.Add(int64(n)) < vacuumEvery {
		return
	}
	s.moved.Store(0)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	s.pool.Exec(ctx, `VACUUM (SKIP_LOCKED) audit_append`) // best effort
}

func isPgNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// Insert implements audit.Store: one statement, all rows or none, in an
// explicit transaction with the entries' records when there are any.
func (s *pgAudit) Insert(ctx context.Context, entries []audit.Entry) (err error) {
	defer func() { s.lost(err) }()
	if len(entries) == 0 {
		return nil
	}
	n := len(entries)
	var (
		tenant, id, call, decision = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		raw                        = make([][]byte, n)
		records                    bool
	)
	for i, e := range entries {
		ev := e.Event
		tenant[i], id[i], call[i], decision[i] = ev.Tenant, ev.ID, ev.CallID, ev.DecisionID
		raw[i] = e.Raw
		records = records || e.Record != nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.writeTimeout)
	defer cancel()
	args := []any{tenant, id, call, decision, raw}
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

// Query implements audit.Store. With a call_id or decision_id filter it
// also reads the append table, in the same repeatable-read transaction
// (one snapshot: an event being integrated is in exactly one table).
func (s *pgAudit) Query(ctx context.Context, tenant string, f audit.Filter) (audit.Page, error) {
	q, args, err := postgresQuery(tenant, f)
	if err != nil {
		return audit.Page{}, err
	}
	f, _ = f.Normalize()
	if hasNUL(tenant, f.Tool, f.Principal, f.Outcome, f.Phase, f.SessionID, f.CallID, f.DecisionID) {
		return audit.Page{}, nil
	}
	if !f.NeedsPending() {
		found, err := pgEventRows(s.pool.Query(ctx, q, args...))
		if err != nil {
			return audit.Page{}, err
		}
		return audit.PageOf(tenant, f, found, nil)
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return audit.Page{}, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	found, err := pgEventRows(tx.Query(ctx, q, args...))
	if err != nil {
		return audit.Page{}, err
	}
	pq := `SELECT raw FROM audit_append WHERE tenant = $1`
	pargs := []any{tenant}
	if f.CallID != "" {
		pargs = append(pargs, f.CallID)
		pq += ` AND call_id = $` + strconv.Itoa(len(pargs))
	}
	if f.DecisionID != "" {
		pargs = append(pargs, f.DecisionID)
		pq += ` AND decision_id = $` + strconv.Itoa(len(pargs))
	}
	rows, err := tx.Query(ctx, pq, pargs...)
	if err != nil {
		return audit.Page{}, err
	}
	defer rows.Close()
	var pending []audit.Positioned
	for rows.Next() {
		var raw pgtype.DriverBytes // valid until Next: DecodeEvent copies
		if err := rows.Scan(&raw); err != nil {
			return audit.Page{}, err
		}
		ev, err := audit.DecodeEvent(raw)
		if err != nil {
			return audit.Page{}, err
		}
		if f.Matches(ev) {
			ms, _ := audit.TimeMS(ev)
			pending = append(pending, audit.Positioned{Pos: audit.Position{TimeMS: ms, ID: ev.ID}, Ev: ev})
		}
	}
	if err := rows.Err(); err != nil {
		return audit.Page{}, err
	}
	return audit.PageOf(tenant, f, found, pending)
}

// pgEventRows reads (time_ms, id, raw, log_index) rows of the page query.
func pgEventRows(rows pgx.Rows, err error) ([]audit.Positioned, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []audit.Positioned
	for rows.Next() {
		var p audit.Positioned
		var raw pgtype.DriverBytes // valid until Next: DecodeEvent copies
		var idx *int64
		if err := rows.Scan(&p.Pos.TimeMS, &p.Pos.ID, &raw, &idx); err != nil {
			return nil, err
		}
		if p.Ev, err = audit.DecodeEvent(raw); err != nil {
			return nil, err
		}
		p.Ev.LogIndex = idx
		out = append(out, p)
	}
	return out, rows.Err()
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
	b.WriteString("SELECT time_ms, id, raw, log_index FROM audit_events WHERE tenant = $1")
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

// Get implements audit.Store: the events table, else the append table, in
// one statement (one snapshot).
func (s *pgAudit) Get(ctx context.Context, tenant, id string) (*audit.Event, error) {
	if hasNUL(tenant, id) {
		return nil, audit.ErrNotFound
	}
	var raw []byte
	var idx *int64
	err := s.pool.QueryRow(ctx, `
		(SELECT raw, log_index FROM audit_events WHERE tenant = $1 AND id = $2 LIMIT 1)
		UNION ALL
		(SELECT raw, NULL FROM audit_append WHERE tenant = $1 AND id = $2 ORDER BY seq LIMIT 1)
		LIMIT 1`, tenant, id).Scan(&raw, &idx)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, audit.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	ev, err := audit.DecodeEvent(raw)
	if err != nil {
		return nil, err
	}
	ev.LogIndex = idx
	return ev, nil
}

// pgQuerier is a pool or a transaction.
type pgQuerier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Tree implements audit.Store.
func (s *pgAudit) Tree(ctx context.Context, tenant string) (audit.TreeHead, error) {
	if hasNUL(tenant) {
		return audit.TreeHead{}, nil
	}
	return pgTree(ctx, s.pool, tenant, "")
}

func pgTree(ctx context.Context, q pgQuerier, tenant, lock string) (audit.TreeHead, error) {
	return scanTree(q.QueryRow(ctx, `SELECT `+treeColumns+` FROM audit_trees WHERE tenant = $1`+lock, tenant))
}

// Scan implements audit.Store. It is one statement, so it reads one
// snapshot while replicas keep committing, and it streams: rows arrive as
// fn consumes them, whatever the tenant's size.
func (s *pgAudit) Scan(ctx context.Context, tenant string, from, to int64, fn func(audit.Row) error) error {
	if hasNUL(tenant) {
		return nil
	}
	rows, err := s.pool.Query(ctx, `SELECT e.raw, e.log_index, n.hash, e.tenant, e.chain, e.seq, e.id, e.time_ms,
		e.tool, e.principal, e.outcome, e.phase, e.session_id, e.call_id, e.decision_id, e.hash
		FROM audit_events e LEFT JOIN audit_tree_nodes n ON n.tenant = e.tenant AND n.level = 0 AND n.idx = e.log_index
		WHERE e.tenant = $1 AND e.log_index >= $2 AND e.log_index < $3 ORDER BY e.log_index`, tenant, from, to)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r audit.Row
		var raw, leaf pgtype.DriverBytes // Row.Raw and Leaf are only valid during fn
		if err := rows.Scan(&raw, &r.LogIndex, &leaf, &r.Tenant, &r.Chain, &r.Seq, &r.ID, &r.TimeMS, &r.Tool,
			&r.Principal, &r.Outcome, &r.Phase, &r.SessionID, &r.CallID, &r.DecisionID, &r.Hash); err != nil {
			return err
		}
		r.Raw, r.Leaf = raw, leaf
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Nodes implements audit.Store.
func (s *pgAudit) Nodes(ctx context.Context, tenant string, ids []tlog.NodeID) ([][]byte, error) {
	return pgNodes(ctx, s.pool, tenant, ids)
}

func pgNodes(ctx context.Context, q pgQuerier, tenant string, ids []tlog.NodeID) ([][]byte, error) {
	levels, idxs := make([]int16, len(ids)), make([]int64, len(ids))
	for i, id := range ids {
		levels[i], idxs[i] = int16(id.Level), int64(id.Index)
	}
	rows, err := q.Query(ctx, `SELECT n.level, n.idx, n.hash FROM unnest($2::smallint[], $3::bigint[]) u(level, idx)
		JOIN audit_tree_nodes n ON n.tenant = $1 AND n.level = u.level AND n.idx = u.idx`, tenant, levels, idxs)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	got := make(map[tlog.NodeID][]byte, len(ids))
	for rows.Next() {
		var level int16
		var idx int64
		var h []byte
		if err := rows.Scan(&level, &idx, &h); err != nil {
			return nil, err
		}
		got[tlog.NodeID{Level: uint8(level), Index: uint64(idx)}] = h
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return orderNodes(ids, got)
}

// pgWork lists the tenants in the append table with a recursive skip scan
// of its (tenant, seq) key (PostgreSQL has no skip scan of its own), the
// tenants with events of the hash-chain era still to integrate (a partial
// index, empty once they are), and trees grown past their checkpoint.
const pgWork = `
	WITH RECURSIVE t(tenant) AS (
		SELECT min(tenant) FROM audit_append
		UNION ALL
		SELECT (SELECT min(a.tenant) FROM audit_append a WHERE a.tenant > t.tenant)
		FROM t WHERE t.tenant IS NOT NULL
	)
	SELECT tenant FROM t WHERE tenant IS NOT NULL
	UNION SELECT DISTINCT tenant FROM audit_events WHERE log_index IS NULL
	UNION SELECT tenant FROM audit_trees WHERE checkpoint_size < size`

// IntegrationWork implements audit.Store.
func (s *pgAudit) IntegrationWork(ctx context.Context) ([]string, error) {
	return pgStrings(s.pool.Query(ctx, pgWork))
}

// Tenants implements audit.Store.
func (s *pgAudit) Tenants(ctx context.Context) ([]string, error) {
	return pgStrings(s.pool.Query(ctx, `SELECT tenant FROM audit_trees ORDER BY tenant`))
}

func pgStrings(rows pgx.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Integrate implements audit.Store: one read-committed transaction holding
// the tenant's advisory lock (pg_try_advisory_xact_lock unless wait).
// PostgreSQL releases it with the transaction, also when the replica
// dies.
func (s *pgAudit) Integrate(ctx context.Context, tenant string, wait bool, fn func(context.Context, audit.TreeTx) error) (bool, error) {
	if hasNUL(tenant) {
		return false, nil
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return true, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	const key = `hashtextextended($1 || coalesce(current_schema(), '') || '/' || $2, 0)`
	if wait {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+key+`)`, pgTreeLockKey, tenant); err != nil {
			return true, err
		}
	} else {
		var got bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(`+key+`)`, pgTreeLockKey, tenant).Scan(&got); err != nil {
			return true, err
		}
		if !got {
			return false, nil
		}
	}
	if err := fn(ctx, &pgTreeTx{tx: tx, tenant: tenant}); err != nil {
		return true, err
	}
	return true, tx.Commit(ctx)
}

// pgTreeTx is audit.TreeTx on a transaction holding the tenant's lock.
type pgTreeTx struct {
	tx     pgx.Tx
	tenant string
}

func (t *pgTreeTx) Tree(ctx context.Context) (audit.TreeHead, error) {
	return pgTree(ctx, t.tx, t.tenant, " FOR UPDATE")
}

func (t *pgTreeTx) Legacy(ctx context.Context, max int) ([]audit.LegacyRow, error) {
	rows, err := t.tx.Query(ctx, `SELECT id, hash FROM audit_events
		WHERE tenant = $1 AND log_index IS NULL ORDER BY chain, seq LIMIT $2`, t.tenant, max)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[audit.LegacyRow])
}

func (t *pgTreeTx) Pending(ctx context.Context, max int) ([]audit.PendingRow, error) {
	rows, err := t.tx.Query(ctx, `SELECT seq, id, raw FROM audit_append
		WHERE tenant = $1 ORDER BY seq LIMIT $2`, t.tenant, max)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[audit.PendingRow])
}

func (t *pgTreeTx) Append(ctx context.Context, a audit.TreeAppend) error {
	cur, err := t.Tree(ctx)
	if err != nil {
		return err
	}
	if cur.Size != a.From {
		return fmt.Errorf("store: the tree of %q moved from %d to %d events", t.tenant, a.From, cur.Size)
	}
	if n := len(a.Events); n > 0 {
		var (
			seq, li, ms                         = make([]int64, n), make([]int64, n), make([]int64, n)
			id, tool, principal, outcome, phase = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
			session, call, decision, hash       = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		)
		for i, e := range a.Events {
			seq[i], li[i], ms[i] = e.Seq, e.LogIndex, e.TimeMS
			id[i], tool[i], principal[i], outcome[i], phase[i] = e.ID, e.Tool, e.Principal, e.Outcome, e.Phase
			session[i], call[i], decision[i], hash[i] = e.SessionID, e.CallID, e.DecisionID, e.Hash
		}
		// Moved as one statement: the raw JSON never leaves the server.
		tag, err := t.tx.Exec(ctx, `WITH moved AS (
				DELETE FROM audit_append a USING unnest($2::bigint[]) s(seq)
				WHERE a.tenant = $1 AND a.seq = s.seq RETURNING a.seq, a.raw
			)
			INSERT INTO audit_events (tenant, log_index, chain, seq, id, time_ms, tool, principal, outcome, phase,
				session_id, call_id, decision_id, hash, raw)
			SELECT $1, u.li, '', 0, u.id, u.ms, u.tool, u.principal, u.outcome, u.phase, u.session, u.call, u.decision, u.hash, m.raw
			FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::bigint[], $6::text[], $7::text[], $8::text[], $9::text[],
				$10::text[], $11::text[], $12::text[], $13::text[]) u(seq, li, id, ms, tool, principal, outcome, phase, session, call, decision, hash)
			JOIN moved m ON m.seq = u.seq`,
			t.tenant, seq, li, id, ms, tool, principal, outcome, phase, session, call, decision, hash)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != int64(n) {
			return fmt.Errorf("store: %d of %d append rows of %q are gone", int64(n)-tag.RowsAffected(), n, t.tenant)
		}
	}
	if n := len(a.Legacy); n > 0 {
		id, li := make([]string, n), make([]int64, n)
		for i, l := range a.Legacy {
			id[i], li[i] = l.ID, l.LogIndex
		}
		tag, err := t.tx.Exec(ctx, `UPDATE audit_events e SET log_index = u.li
			FROM unnest($2::text[], $3::bigint[]) u(id, li)
			WHERE e.tenant = $1 AND e.id = u.id AND e.log_index IS NULL`, t.tenant, id, li)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != int64(n) {
			return fmt.Errorf("store: %d of %d events of %q to integrate are gone or share an id", int64(n)-tag.RowsAffected(), n, t.tenant)
		}
	}
	if n := len(a.Nodes); n > 0 {
		levels, idxs, hashes := make([]int16, n), make([]int64, n), make([][]byte, n)
		for i, nd := range a.Nodes {
			levels[i], idxs[i], hashes[i] = int16(nd.ID.Level), int64(nd.ID.Index), nd.Hash
		}
		if _, err := t.tx.Exec(ctx, `INSERT INTO audit_tree_nodes (tenant, level, idx, hash)
			SELECT $1, * FROM unnest($2::smallint[], $3::bigint[], $4::bytea[])`, t.tenant, levels, idxs, hashes); err != nil {
			return err
		}
	}
	_, err = t.tx.Exec(ctx, `INSERT INTO audit_trees (tenant, size, state, root) VALUES ($1, $2, $3, $4)
		ON CONFLICT (tenant) DO UPDATE SET size = excluded.size, state = excluded.state, root = excluded.root`,
		t.tenant, a.Size, a.State, a.Root)
	return err
}

func (t *pgTreeTx) Nodes(ctx context.Context, ids []tlog.NodeID) ([][]byte, error) {
	return pgNodes(ctx, t.tx, t.tenant, ids)
}

func (t *pgTreeTx) PutCheckpoint(ctx context.Context, note []byte, size, ms int64) error {
	tag, err := t.tx.Exec(ctx, `UPDATE audit_trees SET checkpoint = $2, checkpoint_size = $3, checkpoint_ms = $4
		WHERE tenant = $1`, t.tenant, note, size, ms)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("store: no tree of %q to checkpoint", t.tenant)
	}
	return nil
}

func (t *pgTreeTx) Ages(ctx context.Context, from int64, max int) ([]int64, []int64, error) {
	rows, err := t.tx.Query(ctx, `SELECT log_index, time_ms FROM audit_events
		WHERE tenant = $1 AND log_index >= $2 ORDER BY log_index LIMIT $3`, t.tenant, from, max)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	return scanAges(rows)
}

func (t *pgTreeTx) Prune(ctx context.Context, from, to, cutoffMS int64) (int64, error) {
	tag, err := t.tx.Exec(ctx, `DELETE FROM audit_events WHERE tenant = $1 AND log_index >= $2 AND log_index < $3`,
		t.tenant, from, to)
	if err != nil {
		return 0, err
	}
	if _, err := t.tx.Exec(ctx, `UPDATE audit_trees SET pruned = $2, pruned_before_ms = $3 WHERE tenant = $1`,
		t.tenant, to, cutoffMS); err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

// LegacyCheckpoints implements audit.Store.
func (s *pgAudit) LegacyCheckpoints(ctx context.Context, tenant string) (map[string]audit.Checkpoint, error) {
	out := map[string]audit.Checkpoint{}
	if hasNUL(tenant) {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT tenant, chain, seq, hash, pruned_before_ms, created_ms, checkpoint_hash
		FROM audit_checkpoints WHERE tenant = $1`, tenant)
	if err != nil {
		return nil, err
	}
	cps, err := pgx.CollectRows(rows, pgx.RowToStructByPos[audit.Checkpoint])
	if err != nil {
		return nil, err
	}
	for _, c := range cps {
		out[c.Chain] = c
	}
	return out, nil
}

// Ping implements audit.Store: the server answers and the schema is there.
func (s *pgAudit) Ping(ctx context.Context) error {
	var one int
	err := s.pool.QueryRow(ctx, `SELECT 1 FROM `+versionTable+` LIMIT 1`).Scan(&one)
	s.lost(err)
	return err
}

// lost closes every connection of the pool when err says the server ended
// one (a restart, a failover, an administrator's pg_terminate_backend) or
// the network broke it: the other idle connections are then most likely
// dead too, and each would otherwise fail one more request (a write
// refused, a readiness probe failed) before the pool replaced it.
func (s *pgAudit) lost(err error) {
	if err != nil && connectionLost(err) {
		s.pool.Reset()
	}
}

// connectionLost reports whether err ended the connection it came from:
// SQLSTATE class 08 (connection exception) or 57P (the server shutting
// down or terminating the backend), or a broken transport.
func connectionLost(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P")
	}
	var ne net.Error
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || (errors.As(err, &ne) && !ne.Timeout())
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
