package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/tlog"
)

// pgAudit is the audit.Store for any number of identical gateway replicas
// sharing one PostgreSQL database, through pgx's database/sql wrapper on
// the pool every repository shares. The hot path (Insert) adds rows to
// audit_append, keyed (tenant, seq) with seq from an identity: replicas
// never contend on a row or a chain head. A batch is one INSERT statement,
// hence one transaction (an explicit one when it carries records).
//
// Each tenant's tree has one integrator at a time, elected per
// transaction by a transaction-scoped advisory lock on the tenant: any
// replica's integrator may take it, the others skip the tenant (or, when
// asked to wait, queue behind it).
//
// Durability is PostgreSQL's: a batch is durable on return as long as the
// server's synchronous_commit is on (the default) or stronger.
type pgAudit struct {
	auditStore
	pgAuditOps
	pool *pgxpool.Pool
	// moved counts the rows this store's integrators moved out of the
	// append table since it was last vacuumed.
	moved atomic.Int64
}

// pgAuditOps are the PostgreSQL shapes of auditOps: one array parameter
// per column, unnested into rows: one round trip and one cached plan
// whatever the batch size.
type pgAuditOps struct{}

var _ audit.Store = (*pgAudit)(nil)

// pgAuditDialect: IntegrationWork lists the tenants in the append table
// with a recursive skip scan of its (tenant, seq) key (PostgreSQL has no
// skip scan of its own), the tenants with events of the hash-chain era
// still to integrate (a partial index, empty once they are), and trees
// grown past their checkpoint. The integrator's read of the tree locks
// its row.
var pgAuditDialect = (&auditDialect{
	dollar:     true,
	refusesNUL: true,
	byID:       `audit_events`,
	legacy:     `audit_events`,
	work: `
	WITH RECURSIVE t(tenant) AS (
		SELECT min(tenant) FROM audit_append
		UNION ALL
		SELECT (SELECT min(a.tenant) FROM audit_append a WHERE a.tenant > t.tenant)
		FROM t WHERE t.tenant IS NOT NULL
	)
	SELECT tenant FROM t WHERE tenant IS NOT NULL
	UNION SELECT DISTINCT tenant FROM audit_events WHERE log_index IS NULL
	UNION SELECT tenant FROM audit_trees WHERE checkpoint_size < size`,
	lockTree:    ` FOR UPDATE`,
	snapshot:    &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true},
	write:       &sql.TxOptions{Isolation: sql.LevelReadCommitted},
	insertAlone: true,
}).build()

func newPgAudit(db *sql.DB, pool *pgxpool.Pool, writeTimeout time.Duration) *pgAudit {
	s := &pgAudit{auditStore: auditStore{w: db, r: db, d: pgAuditDialect, writeTimeout: writeTimeout}, pool: pool}
	s.ops = &s.pgAuditOps
	return s
}

// pgTreeLockKey names the advisory lock of one tenant's tree, with the
// schema and tenant appended: one integrator (or prune) per tenant across
// all replicas.
const pgTreeLockKey = "toolgate/audit/tree/"

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
	s.w.ExecContext(ctx, `VACUUM (SKIP_LOCKED) audit_append`) // best effort
}

// Insert implements audit.Store, resetting the pool when the server
// dropped the connection.
func (s *pgAudit) Insert(ctx context.Context, entries []audit.Entry) error {
	err := s.auditStore.Insert(ctx, entries)
	s.lost(err)
	return err
}

// Ping implements audit.Store, resetting the pool when the server dropped
// the connection.
func (s *pgAudit) Ping(ctx context.Context) error {
	err := s.auditStore.Ping(ctx)
	s.lost(err)
	return err
}

func (pgAuditOps) insert(ctx context.Context, x querier, entries []audit.Entry) error {
	n := len(entries)
	tenant, id, call, decision := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	raw := make([][]byte, n)
	for i, e := range entries {
		ev := e.Event
		tenant[i], id[i], call[i], decision[i] = ev.Tenant, ev.ID, ev.CallID, ev.DecisionID
		raw[i] = e.Raw
	}
	_, err := x.ExecContext(ctx, `INSERT INTO audit_append (tenant, id, call_id, decision_id, raw)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bytea[])`, tenant, id, call, decision, raw)
	return err
}

// Integrate implements audit.Store: one read-committed transaction holding
// the tenant's advisory lock (pg_try_advisory_xact_lock unless wait).
// PostgreSQL releases it with the transaction, also when the replica
// dies.
func (s *pgAudit) Integrate(ctx context.Context, tenant string, wait bool, fn func(context.Context, audit.TreeTx) error) (bool, error) {
	if hasNUL(tenant) {
		return false, nil
	}
	tx, err := s.w.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return true, err
	}
	defer tx.Rollback()
	const key = `hashtextextended($1 || coalesce(current_schema(), '') || '/' || $2, 0)`
	if wait {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(`+key+`)`, pgTreeLockKey, tenant); err != nil {
			return true, err
		}
	} else {
		var got bool
		if err := tx.QueryRowContext(ctx, `SELECT pg_try_advisory_xact_lock(`+key+`)`, pgTreeLockKey, tenant).Scan(&got); err != nil {
			return true, err
		}
		if !got {
			return false, nil
		}
	}
	return true, s.integrate(ctx, tx, tenant, fn)
}

// move is one statement: the raw JSON never leaves the server.
func (pgAuditOps) move(ctx context.Context, tx *sql.Tx, tenant string, events []audit.IntegratedEvent, _ map[int64]audit.PendingRow) error {
	n := len(events)
	var (
		seq, li, ms                         = make([]int64, n), make([]int64, n), make([]int64, n)
		id, tool, principal, outcome, phase = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		session, call, decision, hash       = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	)
	for i, e := range events {
		seq[i], li[i], ms[i] = e.Seq, e.LogIndex, e.TimeMS
		id[i], tool[i], principal[i], outcome[i], phase[i] = e.ID, e.Tool, e.Principal, e.Outcome, e.Phase
		session[i], call[i], decision[i], hash[i] = e.SessionID, e.CallID, e.DecisionID, e.Hash
	}
	res, err := tx.ExecContext(ctx, `WITH moved AS (
			DELETE FROM audit_append a USING unnest($2::bigint[]) s(seq)
			WHERE a.tenant = $1 AND a.seq = s.seq RETURNING a.seq, a.raw
		)
		INSERT INTO audit_events (tenant, log_index, chain, seq, id, time_ms, tool, principal, outcome, phase,
			session_id, call_id, decision_id, hash, raw)
		SELECT $1, u.li, '', 0, u.id, u.ms, u.tool, u.principal, u.outcome, u.phase, u.session, u.call, u.decision, u.hash, m.raw
		FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::bigint[], $6::text[], $7::text[], $8::text[], $9::text[],
			$10::text[], $11::text[], $12::text[], $13::text[]) u(seq, li, id, ms, tool, principal, outcome, phase, session, call, decision, hash)
		JOIN moved m ON m.seq = u.seq`,
		tenant, seq, li, id, ms, tool, principal, outcome, phase, session, call, decision, hash)
	if err != nil {
		return err
	}
	if got, _ := res.RowsAffected(); got != int64(n) {
		return fmt.Errorf("store: %d of %d append rows of %q are gone", int64(n)-got, n, tenant)
	}
	return nil
}

func (pgAuditOps) index(ctx context.Context, tx *sql.Tx, tenant string, legacy []audit.LegacyIndex) error {
	n := len(legacy)
	id, li := make([]string, n), make([]int64, n)
	for i, l := range legacy {
		id[i], li[i] = l.ID, l.LogIndex
	}
	res, err := tx.ExecContext(ctx, `UPDATE audit_events e SET log_index = u.li
		FROM unnest($2::text[], $3::bigint[]) u(id, li)
		WHERE e.tenant = $1 AND e.id = u.id AND e.log_index IS NULL`, tenant, id, li)
	if err != nil {
		return err
	}
	if got, _ := res.RowsAffected(); got != int64(n) {
		return fmt.Errorf("store: %d of %d events of %q to integrate are gone or share an id", int64(n)-got, n, tenant)
	}
	return nil
}

func (pgAuditOps) putNodes(ctx context.Context, tx *sql.Tx, tenant string, nodes []tlog.Node) error {
	n := len(nodes)
	levels, idxs, hashes := make([]int16, n), make([]int64, n), make([][]byte, n)
	for i, nd := range nodes {
		levels[i], idxs[i], hashes[i] = int16(nd.ID.Level), int64(nd.ID.Index), nd.Hash
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO audit_tree_nodes (tenant, level, idx, hash)
		SELECT $1, * FROM unnest($2::smallint[], $3::bigint[], $4::bytea[])`, tenant, levels, idxs, hashes)
	return err
}

func (pgAuditOps) nodes(ctx context.Context, q querier, tenant string, ids []tlog.NodeID) (map[tlog.NodeID][]byte, error) {
	got := make(map[tlog.NodeID][]byte, len(ids))
	if hasNUL(tenant) {
		return got, nil
	}
	levels, idxs := make([]int16, len(ids)), make([]int64, len(ids))
	for i, id := range ids {
		levels[i], idxs[i] = int16(id.Level), int64(id.Index)
	}
	rows, err := q.QueryContext(ctx, `SELECT n.level, n.idx, n.hash FROM unnest($2::smallint[], $3::bigint[]) u(level, idx)
		JOIN audit_tree_nodes n ON n.tenant = $1 AND n.level = u.level AND n.idx = u.idx`, tenant, levels, idxs)
	if err := nodeRows(rows, err, got); err != nil {
		return nil, err
	}
	return got, nil
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
// down or terminating the backend), a broken transport, or database/sql's
// verdict that the connection is bad.
func connectionLost(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P")
	}
	var ne net.Error
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || (errors.As(err, &ne) && !ne.Timeout())
}
