package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/tlog"
)

// sqliteAudit is the embedded audit.Store, on the database's writer
// connection and read pool (see sqlite.go).
//
// The hot path (Insert) adds rows to audit_append, a rowid table with no
// other index, in multi-row INSERT statements. The integrator moves them
// into audit_events in transactions of sqliteIntegrateBatch events: they
// hold the one write lock the hot path needs too, so they stay short.
type sqliteAudit struct {
	w, r *sql.DB
	// inserts[n] is the INSERT of n rows into audit_append, on w (n from
	// 1 to sqliteInsertRows): a batch is one statement. Nil when
	// read-only.
	inserts []*sql.Stmt
	// integ makes this handle's integrators take turns; the IMMEDIATE
	// transaction orders them against other handles of the file.
	integ sync.Mutex
	// pruneBatch overrides audit.PruneBatch (tests walk several steps
	// with it).
	pruneBatch int
}

var _ audit.Store = (*sqliteAudit)(nil)

// sqliteInsertRows bounds the rows of one INSERT statement; larger
// batches take several. One statement for the batch costs a third less
// CPU than one per row.
const sqliteInsertRows = 64

// sqliteIntegrateBatch is the integration batch on SQLite (see
// sqliteAudit): about 15–20 ms of holding the write lock on the
// development machine, which bounds how long a durable append may wait
// for it; sqliteIntegrateYield is the pause after a full batch that lets
// the hot path's commits through.
const (
	sqliteIntegrateBatch = 256
	sqliteIntegrateYield = time.Millisecond
)

const appendColumns = 5 // tenant, id, call_id, decision_id, raw

func newSQLiteAudit(ctx context.Context, w, r *sql.DB, readOnly bool) (*sqliteAudit, error) {
	s := &sqliteAudit{w: w, r: r}
	if readOnly {
		return s, nil
	}
	// Prepared up front: the one writer connection is busy inside a
	// batch's transaction.
	s.inserts = make([]*sql.Stmt, sqliteInsertRows+1)
	row := "(?, ?, ?, ?, ?)"
	for n := 1; n <= sqliteInsertRows; n++ {
		st, err := w.PrepareContext(ctx, `INSERT INTO audit_append (tenant, id, call_id, decision_id, raw) VALUES `+
			strings.TrimSuffix(strings.Repeat(row+", ", n), ", "))
		if err != nil {
			s.close()
			return nil, err
		}
		s.inserts[n] = st
	}
	return s, nil
}

func (s *sqliteAudit) close() error {
	var errs []error
	for _, st := range s.inserts {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}

// IntegrateBatch tells the audit log the integration batch SQLite wants.
func (s *sqliteAudit) IntegrateBatch() int { return sqliteIntegrateBatch }

// IntegrateYield tells the audit log to pause between full batches.
func (s *sqliteAudit) IntegrateYield() time.Duration { return sqliteIntegrateYield }

// PruneBatch tells the audit log the prune step (tests shrink it).
func (s *sqliteAudit) PruneBatch() int { return s.pruneBatch }

// Insert implements audit.Store: one IMMEDIATE transaction, all rows and
// their records or none.
func (s *sqliteAudit) Insert(ctx context.Context, entries []audit.Entry) error {
	if s.inserts == nil {
		return errReadOnly
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	args := make([]any, 0, appendColumns*min(len(entries), sqliteInsertRows))
	for rest := entries; len(rest) > 0; {
		n := min(len(rest), sqliteInsertRows)
		args = args[:0]
		for _, e := range rest[:n] {
			ev := e.Event
			args = append(args, ev.Tenant, ev.ID, ev.CallID, ev.DecisionID, e.Raw)
		}
		if _, err := tx.StmtContext(ctx, s.inserts[n]).ExecContext(ctx, args...); err != nil {
			return err
		}
		rest = rest[n:]
	}
	if err := insertRecords(entries, func(q string, args ...any) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	}, false); err != nil {
		return err
	}
	return tx.Commit()
}

// Query implements audit.Store. With a call_id or decision_id filter it
// also reads the append table, in the same read transaction (one
// snapshot: an event being integrated is in exactly one of the tables).
func (s *sqliteAudit) Query(ctx context.Context, tenant string, f audit.Filter) (audit.Page, error) {
	q, args, err := sqliteQuery(tenant, f)
	if err != nil {
		return audit.Page{}, err
	}
	f, _ = f.Normalize()
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return audit.Page{}, err
	}
	defer tx.Rollback()
	found, err := eventRows(tx.QueryContext(ctx, q, args...))
	if err != nil {
		return audit.Page{}, err
	}
	var pending []audit.Positioned
	if f.NeedsPending() {
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
		if pending, err = pendingRows(f)(tx.QueryContext(ctx, pq, pargs...)); err != nil {
			return audit.Page{}, err
		}
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
		var raw []byte
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

// pendingRows decodes raw rows of the append table and keeps those f
// matches.
func pendingRows(f audit.Filter) func(*sql.Rows, error) ([]audit.Positioned, error) {
	return func(rows *sql.Rows, err error) ([]audit.Positioned, error) {
		if err != nil {
			return nil, err
		}
		return matchPending(f, rows)
	}
}

func matchPending(f audit.Filter, rows *sql.Rows) ([]audit.Positioned, error) {
	defer rows.Close()
	var out []audit.Positioned
	for rows.Next() {
		var raw []byte
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

// sqliteQuery builds the page query: equality filters, inclusive time
// bounds, the keyset position after the cursor, newest first, one row more
// than the limit to know whether a next page exists.
func sqliteQuery(tenant string, f audit.Filter) (string, []any, error) {
	f, err := f.Normalize()
	if err != nil {
		return "", nil, err
	}
	pos, hasPos, err := audit.DecodeCursor(tenant, f)
	if err != nil {
		return "", nil, err
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
	args = append(args, f.Limit+1)
	return b.String(), args, nil
}

// Get implements audit.Store: the events table, else the append table, in
// one statement (one snapshot). INDEXED BY: without statistics SQLite
// may prefer walking the tenant's log index.
func (s *sqliteAudit) Get(ctx context.Context, tenant, id string) (*audit.Event, error) {
	var raw []byte
	var idx sql.NullInt64
	err := s.r.QueryRowContext(ctx, `
		SELECT raw, log_index FROM (SELECT raw, log_index FROM audit_events INDEXED BY audit_events_id WHERE tenant = ? AND id = ? LIMIT 1)
		UNION ALL
		SELECT raw, NULL FROM (SELECT raw FROM audit_append WHERE tenant = ? AND id = ? ORDER BY seq LIMIT 1)
		LIMIT 1`, tenant, id, tenant, id).Scan(&raw, &idx)
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

// Tree implements audit.Store.
func (s *sqliteAudit) Tree(ctx context.Context, tenant string) (audit.TreeHead, error) {
	return sqliteTree(ctx, s.r, tenant)
}

// treeColumns are audit_trees' columns as scanTree reads them.
const treeColumns = `size, state, root, pruned, pruned_before_ms, checkpoint, checkpoint_size, checkpoint_ms`

func sqliteTree(ctx context.Context, q querier, tenant string) (audit.TreeHead, error) {
	return scanTree(q.QueryRowContext(ctx, `SELECT `+treeColumns+` FROM audit_trees WHERE tenant = ?`, tenant))
}

// rowScanner is *sql.Row or pgx.Row.
type rowScanner interface{ Scan(dest ...any) error }

func scanTree(row rowScanner) (audit.TreeHead, error) {
	var h audit.TreeHead
	err := row.Scan(&h.Size, &h.State, &h.Root, &h.Pruned, &h.PrunedBeforeMS, &h.Checkpoint, &h.CheckpointSize, &h.CheckpointMS)
	if errors.Is(err, sql.ErrNoRows) || isPgNoRows(err) {
		return audit.TreeHead{}, nil
	}
	return h, err
}

// Scan implements audit.Store. It reads in one transaction, so it sees one
// snapshot even while the writer commits.
func (s *sqliteAudit) Scan(ctx context.Context, tenant string, from, to int64, fn func(audit.Row) error) error {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT e.raw, e.log_index, n.hash, e.tenant, e.chain, e.seq, e.id, e.time_ms,
		e.tool, e.principal, e.outcome, e.phase, e.session_id, e.call_id, e.decision_id, e.hash
		FROM audit_events e LEFT JOIN audit_tree_nodes n ON n.tenant = e.tenant AND n.level = 0 AND n.idx = e.log_index
		WHERE e.tenant = ? AND e.log_index >= ? AND e.log_index < ? ORDER BY e.log_index`, tenant, from, to)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var r audit.Row
		if err := rows.Scan(&r.Raw, &r.LogIndex, &r.Leaf, &r.Tenant, &r.Chain, &r.Seq, &r.ID, &r.TimeMS, &r.Tool,
			&r.Principal, &r.Outcome, &r.Phase, &r.SessionID, &r.CallID, &r.DecisionID, &r.Hash); err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// Nodes implements audit.Store.
func (s *sqliteAudit) Nodes(ctx context.Context, tenant string, ids []tlog.NodeID) ([][]byte, error) {
	return sqliteNodes(ctx, s.r, tenant, ids)
}

// sqliteNodes reads nodes by primary key, a few hundred at a time.
func sqliteNodes(ctx context.Context, q querier, tenant string, ids []tlog.NodeID) ([][]byte, error) {
	got := make(map[tlog.NodeID][]byte, len(ids))
	const per = 200
	for start := 0; start < len(ids); start += per {
		part := ids[start:min(start+per, len(ids))]
		var b strings.Builder
		args := []any{tenant}
		b.WriteString(`SELECT level, idx, hash FROM audit_tree_nodes WHERE tenant = ? AND (level, idx) IN (VALUES `)
		for i, id := range part {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?)")
			args = append(args, int64(id.Level), int64(id.Index))
		}
		b.WriteString(")")
		rows, err := q.QueryContext(ctx, b.String(), args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var level, idx int64
			var h []byte
			if err := rows.Scan(&level, &idx, &h); err != nil {
				rows.Close()
				return nil, err
			}
			got[tlog.NodeID{Level: uint8(level), Index: uint64(idx)}] = h
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return orderNodes(ids, got)
}

// orderNodes returns the hashes of ids in order, or ErrNodeNotFound.
func orderNodes(ids []tlog.NodeID, got map[tlog.NodeID][]byte) ([][]byte, error) {
	out := make([][]byte, len(ids))
	for i, id := range ids {
		h, ok := got[id]
		if !ok {
			return nil, fmt.Errorf("%w: %s", tlog.ErrNodeNotFound, id)
		}
		out[i] = h
	}
	return out, nil
}

// IntegrationWork implements audit.Store: tenants in the append table,
// tenants with events of the hash-chain era not yet integrated, tenants
// whose tree grew past its checkpoint.
func (s *sqliteAudit) IntegrationWork(ctx context.Context) ([]string, error) {
	// INDEXED BY: left alone, the planner scans the whole log index for
	// the few events of the hash-chain era, on every pass.
	rows, err := s.r.QueryContext(ctx, `
		SELECT DISTINCT tenant FROM audit_append
		UNION SELECT DISTINCT tenant FROM audit_events INDEXED BY audit_events_legacy WHERE log_index IS NULL
		UNION SELECT tenant FROM audit_trees WHERE checkpoint_size < size`)
	return stringRows(rows, err)
}

// Tenants implements audit.Store.
func (s *sqliteAudit) Tenants(ctx context.Context) ([]string, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT tenant FROM audit_trees ORDER BY tenant`)
	return stringRows(rows, err)
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

// Integrate implements audit.Store: the handle's integrators take turns,
// and the transaction is IMMEDIATE (the write lock from BEGIN), so no
// other handle of the file changes the tree meanwhile either.
//
// It commits with synchronous=NORMAL (no fsync of its own; the next
// durable commit's fsync covers it, and WAL keeps it atomic either way):
// the events it moves are durable already in the append table, and an
// integration lost to a power cut is redone identically from there (the
// same events in the same order make the same tree, so a checkpoint
// published meanwhile stays true). The writer connection goes back to
// synchronous=FULL before the hot path gets it again, or is discarded.
func (s *sqliteAudit) Integrate(ctx context.Context, tenant string, wait bool, fn func(context.Context, audit.TreeTx) error) (bool, error) {
	if s.inserts == nil {
		return false, errReadOnly
	}
	if wait {
		s.integ.Lock()
	} else if !s.integ.TryLock() {
		return false, nil
	}
	defer s.integ.Unlock()
	conn, err := s.w.Conn(ctx)
	if err != nil {
		return true, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `PRAGMA synchronous = NORMAL`); err != nil {
		return true, err
	}
	defer func() {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA synchronous = FULL`); err != nil {
			conn.Raw(func(any) error { return driver.ErrBadConn }) // never hand out a non-durable writer
		}
	}()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return true, err
	}
	defer tx.Rollback()
	if err := fn(ctx, &sqliteTreeTx{tx: tx, tenant: tenant}); err != nil {
		return true, err
	}
	return true, tx.Commit()
}

// sqliteTreeTx is audit.TreeTx on an IMMEDIATE transaction.
type sqliteTreeTx struct {
	tx     *sql.Tx
	tenant string
	// pending are the append rows Pending read, by seq: Append moves
	// them from memory rather than reading them again.
	pending map[int64]audit.PendingRow
}

func (t *sqliteTreeTx) Tree(ctx context.Context) (audit.TreeHead, error) {
	return sqliteTree(ctx, t.tx, t.tenant)
}

func (t *sqliteTreeTx) Legacy(ctx context.Context, max int) ([]audit.LegacyRow, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT id, hash FROM audit_events INDEXED BY audit_events_legacy
		WHERE tenant = ? AND log_index IS NULL ORDER BY chain, seq LIMIT ?`, t.tenant, max)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []audit.LegacyRow
	for rows.Next() {
		var r audit.LegacyRow
		if err := rows.Scan(&r.ID, &r.Hash); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func (t *sqliteTreeTx) Pending(ctx context.Context, max int) ([]audit.PendingRow, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT seq, id, raw FROM audit_append
		WHERE tenant = ? ORDER BY seq LIMIT ?`, t.tenant, max)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []audit.PendingRow
	if t.pending == nil {
		t.pending = map[int64]audit.PendingRow{}
	}
	for rows.Next() {
		var r audit.PendingRow
		if err := rows.Scan(&r.Seq, &r.ID, &r.Raw); err != nil {
			return nil, err
		}
		out = append(out, r)
		t.pending[r.Seq] = r
	}
	return out, rows.Err()
}

func (t *sqliteTreeTx) Append(ctx context.Context, a audit.TreeAppend) error {
	cur, err := t.Tree(ctx)
	if err != nil {
		return err
	}
	if cur.Size != a.From {
		return fmt.Errorf("store: the tree of %q moved from %d to %d events", t.tenant, a.From, cur.Size)
	}
	if len(a.Events) > 0 {
		// The batch is the tenant's oldest append rows (Pending): one
		// range delete, then multi-row inserts of the rows read (the
		// statement overhead of one statement per row was a fifth of
		// the integrator's time). Values, not INSERT … SELECT, which
		// would need a statement journal for every page it touches.
		var maxSeq int64
		rows := make([][]any, len(a.Events))
		for i, e := range a.Events {
			row, ok := t.pending[e.Seq]
			if !ok {
				return fmt.Errorf("store: append row %d of %q was not read in this transaction", e.Seq, t.tenant)
			}
			maxSeq = max(maxSeq, e.Seq)
			rows[i] = []any{t.tenant, e.LogIndex, e.ID, e.TimeMS, e.Tool, e.Principal, e.Outcome, e.Phase,
				e.SessionID, e.CallID, e.DecisionID, e.Hash, string(row.Raw)}
		}
		res, err := t.tx.ExecContext(ctx, `DELETE FROM audit_append WHERE tenant = ? AND seq <= ?`, t.tenant, maxSeq)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != int64(len(a.Events)) {
			return fmt.Errorf("store: %d append rows of %q up to %d, want the %d read", n, t.tenant, maxSeq, len(a.Events))
		}
		if err := execRows(ctx, t.tx, `INSERT INTO audit_events
			(tenant, log_index, id, time_ms, tool, principal, outcome, phase, session_id, call_id, decision_id, hash, raw, chain, seq)
			VALUES `, "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', 0)", rows, 64); err != nil {
			return err
		}
	}
	if len(a.Legacy) > 0 {
		upd, err := t.tx.PrepareContext(ctx, `UPDATE audit_events SET log_index = ?
			WHERE pk = (SELECT pk FROM audit_events INDEXED BY audit_events_id WHERE tenant = ? AND id = ? AND log_index IS NULL
				ORDER BY chain, seq LIMIT 1)`)
		if err != nil {
			return err
		}
		defer upd.Close()
		for _, l := range a.Legacy {
			res, err := upd.ExecContext(ctx, l.LogIndex, t.tenant, l.ID)
			if err != nil {
				return err
			}
			if n, _ := res.RowsAffected(); n != 1 {
				return fmt.Errorf("store: event %s of %q is gone", l.ID, t.tenant)
			}
		}
	}
	if len(a.Nodes) > 0 {
		rows := make([][]any, len(a.Nodes))
		for i, n := range a.Nodes {
			rows[i] = []any{t.tenant, int64(n.ID.Level), int64(n.ID.Index), n.Hash}
		}
		if err := execRows(ctx, t.tx, `INSERT INTO audit_tree_nodes (tenant, level, idx, hash) VALUES `, "(?, ?, ?, ?)", rows, 200); err != nil {
			return err
		}
	}
	_, err = t.tx.ExecContext(ctx, `INSERT INTO audit_trees (tenant, size, state, root) VALUES (?, ?, ?, ?)
		ON CONFLICT (tenant) DO UPDATE SET size = excluded.size, state = excluded.state, root = excluded.root`,
		t.tenant, a.Size, a.State, a.Root)
	return err
}

// execRows runs prefix followed by one row placeholder per row, per rows
// at a time.
func execRows(ctx context.Context, tx *sql.Tx, prefix, row string, rows [][]any, per int) error {
	var args []any
	for start := 0; start < len(rows); start += per {
		part := rows[start:min(start+per, len(rows))]
		args = args[:0]
		for _, r := range part {
			args = append(args, r...)
		}
		q := prefix + strings.TrimSuffix(strings.Repeat(row+", ", len(part)), ", ")
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return err
		}
	}
	return nil
}

func (t *sqliteTreeTx) Nodes(ctx context.Context, ids []tlog.NodeID) ([][]byte, error) {
	return sqliteNodes(ctx, t.tx, t.tenant, ids)
}

func (t *sqliteTreeTx) PutCheckpoint(ctx context.Context, note []byte, size, ms int64) error {
	res, err := t.tx.ExecContext(ctx, `UPDATE audit_trees SET checkpoint = ?, checkpoint_size = ?, checkpoint_ms = ?
		WHERE tenant = ?`, note, size, ms, t.tenant)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("store: no tree of %q to checkpoint", t.tenant)
	}
	return nil
}

func (t *sqliteTreeTx) Ages(ctx context.Context, from int64, max int) ([]int64, []int64, error) {
	rows, err := t.tx.QueryContext(ctx, `SELECT log_index, time_ms FROM audit_events
		WHERE tenant = ? AND log_index >= ? ORDER BY log_index LIMIT ?`, t.tenant, from, max)
	return ageRows(rows, err)
}

func ageRows(rows *sql.Rows, err error) ([]int64, []int64, error) {
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	return scanAges(rows)
}

// ageScanner is what database/sql's and pgx's rows have in common.
type ageScanner interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// scanAges reads (log_index, time_ms) rows.
func scanAges(rows ageScanner) ([]int64, []int64, error) {
	var idx, ms []int64
	for rows.Next() {
		var i, t int64
		if err := rows.Scan(&i, &t); err != nil {
			return nil, nil, err
		}
		idx, ms = append(idx, i), append(ms, t)
	}
	return idx, ms, rows.Err()
}

func (t *sqliteTreeTx) Prune(ctx context.Context, from, to, cutoffMS int64) (int64, error) {
	res, err := t.tx.ExecContext(ctx, `DELETE FROM audit_events WHERE tenant = ? AND log_index >= ? AND log_index < ?`,
		t.tenant, from, to)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	_, err = t.tx.ExecContext(ctx, `UPDATE audit_trees SET pruned = ?, pruned_before_ms = ? WHERE tenant = ?`, to, cutoffMS, t.tenant)
	return n, err
}

// LegacyCheckpoints implements audit.Store.
func (s *sqliteAudit) LegacyCheckpoints(ctx context.Context, tenant string) (map[string]audit.Checkpoint, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT tenant, chain, seq, hash, pruned_before_ms, created_ms, checkpoint_hash
		FROM audit_checkpoints WHERE tenant = ?`, tenant)
	return checkpointRows(rows, err)
}

func checkpointRows(rows *sql.Rows, err error) (map[string]audit.Checkpoint, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]audit.Checkpoint{}
	for rows.Next() {
		var c audit.Checkpoint
		if err := rows.Scan(&c.Tenant, &c.Chain, &c.Seq, &c.Hash, &c.PrunedBeforeMS, &c.CreatedMS, &c.CheckpointHash); err != nil {
			return nil, err
		}
		out[c.Chain] = c
	}
	return out, rows.Err()
}

// Ping implements audit.Store.
func (s *sqliteAudit) Ping(ctx context.Context) error {
	var one int
	return s.r.QueryRowContext(ctx, `SELECT 1 FROM `+versionTable+` LIMIT 1`).Scan(&one)
}

// Probe implements audit.Store: an upsert of the probe row, committed on
// the writer connection like a batch.
func (s *sqliteAudit) Probe(ctx context.Context) error {
	if s.inserts == nil {
		return errReadOnly
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO store_probe (id, probed_ms) VALUES (1, ?)
		ON CONFLICT (id) DO UPDATE SET probed_ms = excluded.probed_ms`, time.Now().UnixMilli())
	return err
}
