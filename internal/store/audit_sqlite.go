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
// connection and read pool (see sqlite.go). A batch is one IMMEDIATE
// transaction of prepared multi-row INSERTs into audit_append. The
// integrator moves rows into audit_events in transactions of
// sqliteIntegrateBatch events: they hold the one write lock the hot path
// needs too, so they stay short.
type sqliteAudit struct {
	auditStore
	sqliteAuditOps
	// integ makes this handle's integrators take turns; the IMMEDIATE
	// transaction orders them against other handles of the file.
	integ sync.Mutex
}

// sqliteAuditOps are the SQLite shapes of auditOps.
type sqliteAuditOps struct {
	// inserts[n] is the INSERT of n rows into audit_append, on w (n from
	// 1 to sqliteInsertRows): a batch is one statement per 64 rows. Nil
	// when read-only.
	inserts []*sql.Stmt
}

var _ audit.Store = (*sqliteAudit)(nil)

// sqliteInsertRows bounds the rows of one INSERT statement; larger
// batches take several. One statement for the batch costs a third less
// CPU than one per row.
const sqliteInsertRows = 64

// sqliteIntegrateBatch is the integration batch on SQLite: about 15–20 ms
// of holding the write lock on the development machine, which bounds how
// long a durable append may wait for it; sqliteIntegrateYield is the
// pause after a full batch that lets the hot path's commits through.
const (
	sqliteIntegrateBatch = 256
	sqliteIntegrateYield = time.Millisecond
)

// sqliteAuditDialect: INDEXED BY hints, because without statistics SQLite
// may prefer walking the tenant's log index (for a lookup by id, and on
// every integration pass for the few events of the hash-chain era).
var sqliteAuditDialect = (&auditDialect{
	byID:   `audit_events INDEXED BY audit_events_id`,
	legacy: `audit_events INDEXED BY audit_events_legacy`,
	work: `SELECT DISTINCT tenant FROM audit_append
		UNION SELECT DISTINCT tenant FROM audit_events INDEXED BY audit_events_legacy WHERE log_index IS NULL
		UNION SELECT tenant FROM audit_trees WHERE checkpoint_size < size`,
	snapshot: &sql.TxOptions{ReadOnly: true},
}).build()

func newSQLiteAudit(ctx context.Context, w, r *sql.DB, readOnly bool) (*sqliteAudit, error) {
	s := &sqliteAudit{auditStore: auditStore{w: w, r: r, d: sqliteAuditDialect, readOnly: readOnly}}
	s.ops = &s.sqliteAuditOps
	if readOnly {
		return s, nil
	}
	// Prepared up front: the one writer connection is busy inside a
	// batch's transaction.
	s.inserts = make([]*sql.Stmt, sqliteInsertRows+1)
	for n := 1; n <= sqliteInsertRows; n++ {
		st, err := w.PrepareContext(ctx, `INSERT INTO audit_append (tenant, id, call_id, decision_id, raw) VALUES `+valueRows("(?, ?, ?, ?, ?)", n))
		if err != nil {
			s.close()
			return nil, err
		}
		s.inserts[n] = st
	}
	return s, nil
}

// valueRows is n copies of row, comma-separated.
func valueRows(row string, n int) string {
	return strings.TrimSuffix(strings.Repeat(row+", ", n), ", ")
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

func (o *sqliteAuditOps) insert(ctx context.Context, x querier, entries []audit.Entry) error {
	tx := x.(*sql.Tx) // the batch's IMMEDIATE transaction
	args := make([]any, 0, 5*min(len(entries), sqliteInsertRows))
	for rest := entries; len(rest) > 0; {
		n := min(len(rest), sqliteInsertRows)
		args = args[:0]
		for _, e := range rest[:n] {
			ev := e.Event
			args = append(args, ev.Tenant, ev.ID, ev.CallID, ev.DecisionID, e.Raw)
		}
		if _, err := tx.StmtContext(ctx, o.inserts[n]).ExecContext(ctx, args...); err != nil {
			return err
		}
		rest = rest[n:]
	}
	return nil
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
	if s.readOnly {
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
	return true, s.integrate(ctx, tx, tenant, fn)
}

// move: the batch is the tenant's oldest append rows (Pending): one range
// delete, then multi-row inserts of the rows read (the statement overhead
// of one statement per row was a fifth of the integrator's time). Values,
// not INSERT … SELECT, which would need a statement journal for every
// page it touches.
func (o *sqliteAuditOps) move(ctx context.Context, tx *sql.Tx, tenant string, events []audit.IntegratedEvent, pending map[int64]audit.PendingRow) error {
	var maxSeq int64
	rows := make([][]any, len(events))
	for i, e := range events {
		row, ok := pending[e.Seq]
		if !ok {
			return fmt.Errorf("store: append row %d of %q was not read in this transaction", e.Seq, tenant)
		}
		maxSeq = max(maxSeq, e.Seq)
		rows[i] = []any{tenant, e.LogIndex, e.ID, e.TimeMS, e.Tool, e.Principal, e.Outcome, e.Phase,
			e.SessionID, e.CallID, e.DecisionID, e.Hash, string(row.Raw)}
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM audit_append WHERE tenant = ? AND seq <= ?`, tenant, maxSeq)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != int64(len(events)) {
		return fmt.Errorf("store: %d append rows of %q up to %d, want the %d read", n, tenant, maxSeq, len(events))
	}
	return execRows(ctx, tx, `INSERT INTO audit_events
		(tenant, log_index, id, time_ms, tool, principal, outcome, phase, session_id, call_id, decision_id, hash, raw, chain, seq)
		VALUES `, "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, '', 0)", rows, 64)
}

func (o *sqliteAuditOps) index(ctx context.Context, tx *sql.Tx, tenant string, legacy []audit.LegacyIndex) error {
	upd, err := tx.PrepareContext(ctx, `UPDATE audit_events SET log_index = ?
		WHERE pk = (SELECT pk FROM audit_events INDEXED BY audit_events_id WHERE tenant = ? AND id = ? AND log_index IS NULL
			ORDER BY chain, seq LIMIT 1)`)
	if err != nil {
		return err
	}
	defer upd.Close()
	for _, l := range legacy {
		res, err := upd.ExecContext(ctx, l.LogIndex, tenant, l.ID)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("store: event %s of %q is gone", l.ID, tenant)
		}
	}
	return nil
}

func (o *sqliteAuditOps) putNodes(ctx context.Context, tx *sql.Tx, tenant string, nodes []tlog.Node) error {
	rows := make([][]any, len(nodes))
	for i, n := range nodes {
		rows[i] = []any{tenant, int64(n.ID.Level), int64(n.ID.Index), n.Hash}
	}
	return execRows(ctx, tx, `INSERT INTO audit_tree_nodes (tenant, level, idx, hash) VALUES `, "(?, ?, ?, ?)", rows, 200)
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
		if _, err := tx.ExecContext(ctx, prefix+valueRows(row, len(part)), args...); err != nil {
			return err
		}
	}
	return nil
}

// nodes reads nodes by primary key, a few hundred at a time.
func (o *sqliteAuditOps) nodes(ctx context.Context, q querier, tenant string, ids []tlog.NodeID) (map[tlog.NodeID][]byte, error) {
	got := make(map[tlog.NodeID][]byte, len(ids))
	const per = 200
	for start := 0; start < len(ids); start += per {
		part := ids[start:min(start+per, len(ids))]
		args := []any{tenant}
		for _, id := range part {
			args = append(args, int64(id.Level), int64(id.Index))
		}
		rows, err := q.QueryContext(ctx, `SELECT level, idx, hash FROM audit_tree_nodes WHERE tenant = ? AND (level, idx) IN (VALUES `+
			valueRows("(?, ?)", len(part))+`)`, args...)
		if err := nodeRows(rows, err, got); err != nil {
			return nil, err
		}
	}
	return got, nil
}

// nodeRows reads (level, idx, hash) rows into got.
func nodeRows(rows *sql.Rows, err error, got map[tlog.NodeID][]byte) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var level, idx int64
		var h []byte
		if err := rows.Scan(&level, &idx, &h); err != nil {
			return err
		}
		got[tlog.NodeID{Level: uint8(level), Index: uint64(idx)}] = h
	}
	return rows.Err()
}
