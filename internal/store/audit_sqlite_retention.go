package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
)

// Prune implements audit.Store: one IMMEDIATE transaction per step of at most
// audit.PruneBatch events of one chain, deleting the rows and moving the
// checkpoint together, so appends interleave with a long prune.
func (s *sqliteAudit) Prune(ctx context.Context, cutoff time.Time) (audit.PruneResult, error) {
	chains, err := sqliteChains(ctx, s.r)
	if err != nil {
		return audit.PruneResult{}, err
	}
	cutoffMS := cutoff.UnixMilli()
	return audit.PruneChains(chains, func(k audit.ChainKey) (int64, bool, error) {
		tx, err := s.w.BeginTx(ctx, nil)
		if err != nil {
			return 0, false, err
		}
		defer tx.Rollback()
		n, more, err := audit.PruneStep(ctx, sqlitePruneTx{tx: tx, k: k}, k.Tenant, k.Chain,
			cutoffMS, time.Now().UnixMilli(), s.pruneBatchSize())
		if err != nil {
			return 0, false, err
		}
		return n, more, tx.Commit()
	})
}

func (s *sqliteAudit) pruneBatchSize() int64 {
	if s.pruneBatch > 0 {
		return s.pruneBatch
	}
	return audit.PruneBatch
}

// sqliteChains lists every (tenant, chain) with a skip scan of the
// (tenant, chain, seq) index: one seek per chain.
func sqliteChains(ctx context.Context, db *sql.DB) ([]audit.ChainKey, error) {
	var out []audit.ChainKey
	q := `SELECT tenant, chain FROM audit_events ORDER BY tenant, chain LIMIT 1`
	var args []any
	for {
		var k audit.ChainKey
		err := db.QueryRowContext(ctx, q, args...).Scan(&k.Tenant, &k.Chain)
		if errors.Is(err, sql.ErrNoRows) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, k)
		q = `SELECT tenant, chain FROM audit_events WHERE (tenant, chain) > (?, ?) ORDER BY tenant, chain LIMIT 1`
		args = []any{k.Tenant, k.Chain}
	}
}

// sqlitePruneTx is audit.PruneTx on an SQLite transaction.
type sqlitePruneTx struct {
	tx *sql.Tx
	k  audit.ChainKey
}

func (q sqlitePruneTx) Checkpoint(ctx context.Context) (audit.Checkpoint, bool, error) {
	c := audit.Checkpoint{}
	err := q.tx.QueryRowContext(ctx, `SELECT tenant, chain, seq, hash, pruned_before_ms, created_ms, checkpoint_hash
		FROM audit_checkpoints WHERE tenant = ? AND chain = ?`, q.k.Tenant, q.k.Chain).
		Scan(&c.Tenant, &c.Chain, &c.Seq, &c.Hash, &c.PrunedBeforeMS, &c.CreatedMS, &c.CheckpointHash)
	if errors.Is(err, sql.ErrNoRows) {
		return audit.Checkpoint{}, false, nil
	}
	return c, err == nil, err
}

func (q sqlitePruneTx) Bounds(ctx context.Context) (first, head int64, ok bool, err error) {
	var lo, hi sql.NullInt64
	err = q.tx.QueryRowContext(ctx, `SELECT min(seq), max(seq) FROM audit_events WHERE tenant = ? AND chain = ?`,
		q.k.Tenant, q.k.Chain).Scan(&lo, &hi)
	return lo.Int64, hi.Int64, lo.Valid && hi.Valid, err
}

func (q sqlitePruneTx) FirstYoung(ctx context.Context, cutoffMS int64) (int64, bool, error) {
	var seq int64
	err := q.tx.QueryRowContext(ctx, `SELECT seq FROM audit_events
		WHERE tenant = ? AND chain = ? AND time_ms >= ? ORDER BY seq LIMIT 1`,
		q.k.Tenant, q.k.Chain, cutoffMS).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return seq, err == nil, err
}

func (q sqlitePruneTx) HashAt(ctx context.Context, seq int64) (string, error) {
	var h string
	err := q.tx.QueryRowContext(ctx, `SELECT hash FROM audit_events WHERE tenant = ? AND chain = ? AND seq = ?`,
		q.k.Tenant, q.k.Chain, seq).Scan(&h)
	if errors.Is(err, sql.ErrNoRows) {
		// bounds saw rows on both sides of it: a gap.
		return "", fmt.Errorf("%w: tenant %q chain %q has no seq %d", audit.ErrBrokenChain, q.k.Tenant, q.k.Chain, seq)
	}
	return h, err
}

func (q sqlitePruneTx) DeleteRange(ctx context.Context, first, end int64) (int64, error) {
	res, err := q.tx.ExecContext(ctx, `DELETE FROM audit_events WHERE tenant = ? AND chain = ? AND seq BETWEEN ? AND ?`,
		q.k.Tenant, q.k.Chain, first, end)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q sqlitePruneTx) PutCheckpoint(ctx context.Context, c audit.Checkpoint) error {
	_, err := q.tx.ExecContext(ctx, `INSERT INTO audit_checkpoints
		(tenant, chain, seq, hash, pruned_before_ms, created_ms, checkpoint_hash) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, chain) DO UPDATE SET seq = excluded.seq, hash = excluded.hash,
		pruned_before_ms = excluded.pruned_before_ms, created_ms = excluded.created_ms,
		checkpoint_hash = excluded.checkpoint_hash`,
		c.Tenant, c.Chain, c.Seq, c.Hash, c.PrunedBeforeMS, c.CreatedMS, c.CheckpointHash)
	return err
}

// Checkpoints implements audit.Store.
func (s *sqliteAudit) Checkpoints(ctx context.Context, tenant string) (map[string]audit.Checkpoint, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT tenant, chain, seq, hash, pruned_before_ms, created_ms, checkpoint_hash
		FROM audit_checkpoints WHERE tenant = ?`, tenant)
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
