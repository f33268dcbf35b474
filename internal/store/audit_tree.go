package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/tlog"
)

// The tree of a tenant: the reads outside a transaction, and audit.TreeTx
// on the transaction Integrate runs (audit_sqlite.go and audit_postgres.go
// open it, each with its own way of owning the tenant's tree).

// Tree implements audit.Store.
func (s *auditStore) Tree(ctx context.Context, tenant string) (audit.TreeHead, error) {
	if s.nul(tenant) {
		return audit.TreeHead{}, nil
	}
	return scanTree(s.r.QueryRowContext(ctx, s.d.qTree, tenant))
}

func scanTree(row *sql.Row) (audit.TreeHead, error) {
	var h audit.TreeHead
	err := row.Scan(&h.Size, &h.State, &h.Root, &h.Pruned, &h.PrunedBeforeMS, &h.Checkpoint, &h.CheckpointSize, &h.CheckpointMS)
	if errors.Is(err, sql.ErrNoRows) {
		return audit.TreeHead{}, nil
	}
	return h, err
}

// Nodes implements audit.Store.
func (s *auditStore) Nodes(ctx context.Context, tenant string, ids []tlog.NodeID) ([][]byte, error) {
	got, err := s.ops.nodes(ctx, s.r, tenant, ids)
	if err != nil {
		return nil, err
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

// integrate runs fn on tx, a transaction that owns tenant's tree, and
// commits it.
func (s *auditStore) integrate(ctx context.Context, tx *sql.Tx, tenant string, fn func(context.Context, audit.TreeTx) error) error {
	if err := fn(ctx, &treeTx{s: s, tx: tx, tenant: tenant}); err != nil {
		return err
	}
	return tx.Commit()
}

// treeTx is audit.TreeTx on a transaction that owns the tenant's tree.
type treeTx struct {
	s      *auditStore
	tx     *sql.Tx
	tenant string
	// pending are the append rows Pending read, by seq (SQLite's move
	// inserts them from memory rather than reading them again).
	pending map[int64]audit.PendingRow
}

func (t *treeTx) Tree(ctx context.Context) (audit.TreeHead, error) {
	return scanTree(t.tx.QueryRowContext(ctx, t.s.d.qTreeTx, t.tenant))
}

func (t *treeTx) Legacy(ctx context.Context, max int) ([]audit.LegacyRow, error) {
	rows, err := t.tx.QueryContext(ctx, t.s.d.qLegacy, t.tenant, max)
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

func (t *treeTx) Pending(ctx context.Context, max int) ([]audit.PendingRow, error) {
	rows, err := t.tx.QueryContext(ctx, t.s.d.qPending, t.tenant, max)
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

func (t *treeTx) Append(ctx context.Context, a audit.TreeAppend) error {
	cur, err := t.Tree(ctx)
	if err != nil {
		return err
	}
	if cur.Size != a.From {
		return fmt.Errorf("store: the tree of %q moved from %d to %d events", t.tenant, a.From, cur.Size)
	}
	if len(a.Events) > 0 {
		if err := t.s.ops.move(ctx, t.tx, t.tenant, a.Events, t.pending); err != nil {
			return err
		}
	}
	if len(a.Legacy) > 0 {
		if err := t.s.ops.index(ctx, t.tx, t.tenant, a.Legacy); err != nil {
			return err
		}
	}
	if len(a.Nodes) > 0 {
		if err := t.s.ops.putNodes(ctx, t.tx, t.tenant, a.Nodes); err != nil {
			return err
		}
	}
	_, err = t.tx.ExecContext(ctx, t.s.d.qTreePut, t.tenant, a.Size, a.State, a.Root)
	return err
}

func (t *treeTx) Nodes(ctx context.Context, ids []tlog.NodeID) ([][]byte, error) {
	got, err := t.s.ops.nodes(ctx, t.tx, t.tenant, ids)
	if err != nil {
		return nil, err
	}
	return orderNodes(ids, got)
}

func (t *treeTx) PutCheckpoint(ctx context.Context, note []byte, size, ms int64) error {
	res, err := t.tx.ExecContext(ctx, t.s.d.qCheckpoint, note, size, ms, t.tenant)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("store: no tree of %q to checkpoint", t.tenant)
	}
	return nil
}

func (t *treeTx) Ages(ctx context.Context, from int64, max int) ([]int64, []int64, error) {
	rows, err := t.tx.QueryContext(ctx, t.s.d.qAges, t.tenant, from, max)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
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

func (t *treeTx) Prune(ctx context.Context, from, to, cutoffMS int64) (int64, error) {
	res, err := t.tx.ExecContext(ctx, t.s.d.qPrune, t.tenant, from, to)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	if _, err := t.tx.ExecContext(ctx, t.s.d.qPruned, to, cutoffMS, t.tenant); err != nil {
		return 0, err
	}
	return n, nil
}
