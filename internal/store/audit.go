package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/tlog"
)

// auditStore is the audit.Store over database/sql, shared by SQLite
// (audit_sqlite.go) and PostgreSQL (audit_postgres.go), which embed it and
// add what only they do. The tree's transaction is in audit_tree.go.
//
// The hot path (Insert) adds rows to audit_append, which has no other
// index than its key; the integrator moves them into audit_events in
// batches, within one transaction per batch that owns the tenant's tree.
type auditStore struct {
	w, r *sql.DB // on PostgreSQL both are the one pool
	d    *auditDialect
	ops  auditOps
	// readOnly: refuse every write (SQLite opened ReadOnly; PostgreSQL's
	// server refuses them itself).
	readOnly bool
	// writeTimeout bounds one Insert or Probe (0: no bound).
	writeTimeout time.Duration
	// pruneBatch overrides audit.PruneBatch (tests walk several steps
	// with it).
	pruneBatch int
}

// auditDialect names the small differences between the databases' SQL;
// the statements are built from them once per dialect (build).
type auditDialect struct {
	dollar bool // $n placeholders instead of ?
	// refusesNUL: no text value may hold a NUL character (PostgreSQL): a
	// lookup with one finds nothing rather than failing the statement.
	refusesNUL bool
	// byID and legacy name the events table for lookups by id and for
	// the events of the hash-chain era (SQLite: an index hint, without
	// which the planner prefers walking the tenant's log index).
	byID, legacy string
	// work is the IntegrationWork statement.
	work string
	// lockTree is appended to the tree's read in a tree transaction.
	lockTree string
	// snapshot: a read of both tables in one snapshot; write: a batch's
	// transaction (nil: the driver's default).
	snapshot, write *sql.TxOptions
	// insertAlone: a batch without records is one atomic statement and
	// needs no explicit transaction.
	insertAlone bool

	// The shared statements, in the dialect's placeholders.
	qGet, qTree, qTreeTx, qScan, qTenants, qLegacy, qPending, qTreePut, qCheckpoint,
	qAges, qPrune, qPruned, qCheckpoints, qPing, qProbe string
}

// auditOps are the steps whose SQL differs in shape, not only in words:
// SQLite binds rows of VALUES, PostgreSQL one array per column.
type auditOps interface {
	// insert adds the batch's rows to the append table.
	insert(ctx context.Context, x querier, entries []audit.Entry) error
	// move inserts the integrated events into the events table and
	// deletes their append rows (pending: the rows read by Pending).
	move(ctx context.Context, tx *sql.Tx, tenant string, events []audit.IntegratedEvent, pending map[int64]audit.PendingRow) error
	// index sets the log index of events of the hash-chain era.
	index(ctx context.Context, tx *sql.Tx, tenant string, legacy []audit.LegacyIndex) error
	// putNodes inserts tree nodes; nodes reads them by id.
	putNodes(ctx context.Context, tx *sql.Tx, tenant string, nodes []tlog.Node) error
	nodes(ctx context.Context, q querier, tenant string, ids []tlog.NodeID) (map[tlog.NodeID][]byte, error)
}

// treeColumns are audit_trees' columns as scanTree reads them.
const treeColumns = `size, state, root, pruned, pruned_before_ms, checkpoint, checkpoint_size, checkpoint_ms`

// build fills in the dialect's statements.
func (d *auditDialect) build() *auditDialect {
	q := func(s string) string { return placeholders(s, d.dollar) }
	// Get: the events table, else the append table, in one statement
	// (one snapshot).
	d.qGet = q(`SELECT raw, log_index FROM (SELECT raw, log_index FROM ` + d.byID + ` WHERE tenant = ? AND id = ? LIMIT 1) e
		UNION ALL
		SELECT raw, NULL FROM (SELECT raw FROM audit_append WHERE tenant = ? AND id = ? ORDER BY seq LIMIT 1) a
		LIMIT 1`)
	d.qTree = q(`SELECT ` + treeColumns + ` FROM audit_trees WHERE tenant = ?`)
	d.qTreeTx = d.qTree + d.lockTree
	d.qScan = q(`SELECT e.raw, e.log_index, n.hash, e.tenant, e.chain, e.seq, e.id, e.time_ms,
		e.tool, e.principal, e.outcome, e.phase, e.session_id, e.call_id, e.decision_id, e.hash
		FROM audit_events e LEFT JOIN audit_tree_nodes n ON n.tenant = e.tenant AND n.level = 0 AND n.idx = e.log_index
		WHERE e.tenant = ? AND e.log_index >= ? AND e.log_index < ? ORDER BY e.log_index`)
	d.qTenants = `SELECT tenant FROM audit_trees ORDER BY tenant`
	d.qLegacy = q(`SELECT id, hash FROM ` + d.legacy + ` WHERE tenant = ? AND log_index IS NULL ORDER BY chain, seq LIMIT ?`)
	d.qPending = q(`SELECT seq, id, raw FROM audit_append WHERE tenant = ? ORDER BY seq LIMIT ?`)
	d.qTreePut = q(`INSERT INTO audit_trees (tenant, size, state, root) VALUES (?, ?, ?, ?)
		ON CONFLICT (tenant) DO UPDATE SET size = excluded.size, state = excluded.state, root = excluded.root`)
	d.qCheckpoint = q(`UPDATE audit_trees SET checkpoint = ?, checkpoint_size = ?, checkpoint_ms = ? WHERE tenant = ?`)
	d.qAges = q(`SELECT log_index, time_ms FROM audit_events WHERE tenant = ? AND log_index >= ? ORDER BY log_index LIMIT ?`)
	d.qPrune = q(`DELETE FROM audit_events WHERE tenant = ? AND log_index >= ? AND log_index < ?`)
	d.qPruned = q(`UPDATE audit_trees SET pruned = ?, pruned_before_ms = ? WHERE tenant = ?`)
	d.qCheckpoints = q(`SELECT tenant, chain, seq, hash, pruned_before_ms, created_ms, checkpoint_hash
		FROM audit_checkpoints WHERE tenant = ?`)
	d.qPing = `SELECT 1 FROM ` + versionTable + ` LIMIT 1`
	d.qProbe = q(`INSERT INTO store_probe (id, probed_ms) VALUES (1, ?)
		ON CONFLICT (id) DO UPDATE SET probed_ms = excluded.probed_ms`)
	return d
}

// nul reports whether the dialect can hold none of ss.
func (s *auditStore) nul(ss ...string) bool { return s.d.refusesNUL && hasNUL(ss...) }

// hasNUL reports whether any of ss holds a NUL character.
func hasNUL(ss ...string) bool {
	for _, s := range ss {
		if strings.IndexByte(s, 0) >= 0 {
			return true
		}
	}
	return false
}

// writing bounds ctx by the write timeout, if any.
func (s *auditStore) writing(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.writeTimeout > 0 {
		return context.WithTimeout(ctx, s.writeTimeout)
	}
	return ctx, func() {}
}

// PruneBatch tells the audit log the prune step (tests shrink it).
func (s *auditStore) PruneBatch() int { return s.pruneBatch }

// Insert implements audit.Store: all rows and their records or none.
func (s *auditStore) Insert(ctx context.Context, entries []audit.Entry) error {
	if s.readOnly {
		return errReadOnly
	}
	if len(entries) == 0 {
		return nil
	}
	ctx, cancel := s.writing(ctx)
	defer cancel()
	records := false
	for _, e := range entries {
		records = records || e.Record != nil
	}
	if !records && s.d.insertAlone {
		return s.ops.insert(ctx, s.w, entries)
	}
	tx, err := s.w.BeginTx(ctx, s.d.write)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := s.ops.insert(ctx, tx, entries); err != nil {
		return err
	}
	if err := insertRecords(entries, func(q string, args ...any) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	}, s.d.dollar); err != nil {
		return err
	}
	return tx.Commit()
}

// Query implements audit.Store. With a call_id or decision_id filter it
// also reads the append table, in the same snapshot (an event being
// integrated is in exactly one of the tables).
func (s *auditStore) Query(ctx context.Context, tenant string, f audit.Filter) (audit.Page, error) {
	q, args, err := s.pageQuery(tenant, f)
	if err != nil {
		return audit.Page{}, err
	}
	f, _ = f.Normalize()
	if s.nul(tenant, f.Tool, f.Principal, f.Outcome, f.Phase, f.SessionID, f.CallID, f.DecisionID) {
		return audit.Page{}, nil
	}
	if !f.NeedsPending() {
		found, err := eventRows(s.r.QueryContext(ctx, q, args...))
		if err != nil {
			return audit.Page{}, err
		}
		return audit.PageOf(tenant, f, found, nil)
	}
	tx, err := s.r.BeginTx(ctx, s.d.snapshot)
	if err != nil {
		return audit.Page{}, err
	}
	defer tx.Rollback()
	found, err := eventRows(tx.QueryContext(ctx, q, args...))
	if err != nil {
		return audit.Page{}, err
	}
	pq := `SELECT raw FROM audit_append WHERE tenant = ?`
	pargs := []any{tenant}
	if f.CallID != "" {
		pq += ` AND call_id = ?`
		pargs = append(pargs, f.CallID)
	}
	if f.DecisionID != "" {
		pq += ` AND decision_id = ?`
		pargs = append(pargs, f.DecisionID)
	}
	rows, err := tx.QueryContext(ctx, placeholders(pq, s.d.dollar), pargs...)
	if err != nil {
		return audit.Page{}, err
	}
	pending, err := matchPending(f, rows)
	if err != nil {
		return audit.Page{}, err
	}
	return audit.PageOf(tenant, f, found, pending)
}

// eventRows reads (time_ms, id, raw, log_index) rows of the page query.
func eventRows(rows *sql.Rows, err error) ([]audit.Positioned, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []audit.Positioned
	for rows.Next() {
		var p audit.Positioned
		var raw sql.RawBytes // valid until Next: DecodeEvent copies
		var idx sql.NullInt64
		if err := rows.Scan(&p.Pos.TimeMS, &p.Pos.ID, &raw, &idx); err != nil {
			return nil, err
		}
		if p.Ev, err = audit.DecodeEvent(raw); err != nil {
			return nil, err
		}
		if idx.Valid {
			p.Ev.LogIndex = &idx.Int64
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// matchPending decodes raw rows of the append table and keeps those f
// matches.
func matchPending(f audit.Filter, rows *sql.Rows) ([]audit.Positioned, error) {
	defer rows.Close()
	var out []audit.Positioned
	for rows.Next() {
		var raw sql.RawBytes
		if err := rows.Scan(&raw); err != nil {
			return nil, err
		}
		ev, err := audit.DecodeEvent(raw)
		if err != nil {
			return nil, err
		}
		if !f.Matches(ev) {
			continue
		}
		ms, _ := audit.TimeMS(ev)
		out = append(out, audit.Positioned{Pos: audit.Position{TimeMS: ms, ID: ev.ID}, Ev: ev})
	}
	return out, rows.Err()
}

// pageQuery builds the page query: equality filters, inclusive time
// bounds, the keyset position after the cursor (a row comparison, one
// index condition), newest first, one row more than the limit to know
// whether a next page exists. Both databases use their indexes the same
// way with it.
func (s *auditStore) pageQuery(tenant string, f audit.Filter) (string, []any, error) {
	f, err := f.Normalize()
	if err != nil {
		return "", nil, err
	}
	pos, hasPos, err := audit.DecodeCursor(tenant, f)
	if err != nil {
		return "", nil, err
	}
	if s.nul(pos.ID) { // no event id holds one: a forged cursor
		return "", nil, audit.ErrBadCursor
	}
	var b strings.Builder
	b.WriteString("SELECT time_ms, id, raw, log_index FROM audit_events WHERE tenant = ?")
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
	args = append(args, int64(f.Limit+1))
	return placeholders(b.String(), s.d.dollar), args, nil
}

// Get implements audit.Store.
func (s *auditStore) Get(ctx context.Context, tenant, id string) (*audit.Event, error) {
	if s.nul(tenant, id) {
		return nil, audit.ErrNotFound
	}
	var raw []byte
	var idx sql.NullInt64
	err := s.r.QueryRowContext(ctx, s.d.qGet, tenant, id, tenant, id).Scan(&raw, &idx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, audit.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	ev, err := audit.DecodeEvent(raw)
	if err != nil {
		return nil, err
	}
	if idx.Valid {
		ev.LogIndex = &idx.Int64
	}
	return ev, nil
}

// Scan implements audit.Store. It is one statement, so it reads one
// snapshot while writers commit, and it streams: rows arrive as fn
// consumes them, whatever the tenant's size.
func (s *auditStore) Scan(ctx context.Context, tenant string, from, to int64, fn func(audit.Row) error) error {
	if s.nul(tenant) {
		return nil
	}
	rows, err := s.r.QueryContext(ctx, s.d.qScan, tenant, from, to)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r audit.Row
		var raw, leaf sql.RawBytes // Row.Raw and Leaf are only valid during fn
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

// IntegrationWork implements audit.Store: tenants in the append table,
// tenants with events of the hash-chain era not yet integrated, tenants
// whose tree grew past its checkpoint.
func (s *auditStore) IntegrationWork(ctx context.Context) ([]string, error) {
	return stringRows(s.r.QueryContext(ctx, s.d.work))
}

// Tenants implements audit.Store.
func (s *auditStore) Tenants(ctx context.Context) ([]string, error) {
	return stringRows(s.r.QueryContext(ctx, s.d.qTenants))
}

func stringRows(rows *sql.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// LegacyCheckpoints implements audit.Store.
func (s *auditStore) LegacyCheckpoints(ctx context.Context, tenant string) (map[string]audit.Checkpoint, error) {
	out := map[string]audit.Checkpoint{}
	if s.nul(tenant) {
		return out, nil
	}
	rows, err := s.r.QueryContext(ctx, s.d.qCheckpoints, tenant)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var c audit.Checkpoint
		if err := rows.Scan(&c.Tenant, &c.Chain, &c.Seq, &c.Hash, &c.PrunedBeforeMS, &c.CreatedMS, &c.CheckpointHash); err != nil {
			return nil, err
		}
		out[c.Chain] = c
	}
	return out, rows.Err()
}

// Ping implements audit.Store: the database answers and the schema is
// there.
func (s *auditStore) Ping(ctx context.Context) error {
	var one int
	return s.r.QueryRowContext(ctx, s.d.qPing).Scan(&one)
}

// Probe implements audit.Store: an upsert of the probe row, committed
// like a batch.
func (s *auditStore) Probe(ctx context.Context) error {
	if s.readOnly {
		return errReadOnly
	}
	ctx, cancel := s.writing(ctx)
	defer cancel()
	_, err := s.w.ExecContext(ctx, s.d.qProbe, time.Now().UnixMilli())
	return err
}
