package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgate/toolgate/internal/audit"
)

// pgPruneLockKey names the advisory lock one chain's prune step runs
// under, with the schema, tenant and chain appended: replicas pruning at
// the same time queue per chain instead of racing on its checkpoint.
const pgPruneLockKey = "toolgate/audit/prune/"

// Prune implements audit.Store: one transaction per step of at most audit.PruneBatch
// events of one chain, deleting the rows and moving the checkpoint
// together. Appends go on meanwhile: they only add rows after the head,
// which a prune never touches.
func (s *pgAudit) Prune(ctx context.Context, cutoff time.Time) (audit.PruneResult, error) {
	chains, err := s.chains(ctx)
	if err != nil {
		return audit.PruneResult{}, err
	}
	cutoffMS := cutoff.UnixMilli()
	return audit.PruneChains(chains, func(k audit.ChainKey) (int64, bool, error) {
		tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		if err != nil {
			return 0, false, err
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended(
			$1 || coalesce(current_schema(), '') || '/' || $2 || '/' || $3, 0))`,
			pgPruneLockKey, k.Tenant, k.Chain); err != nil {
			return 0, false, err
		}
		n, more, err := audit.PruneStep(ctx, pgPruneTx{tx: tx, k: k}, k.Tenant, k.Chain,
			cutoffMS, time.Now().UnixMilli(), s.pruneBatchSize())
		if err != nil {
			return 0, false, err
		}
		return n, more, tx.Commit(ctx)
	})
}

func (s *pgAudit) pruneBatchSize() int64 {
	if s.pruneBatch > 0 {
		return s.pruneBatch
	}
	return audit.PruneBatch
}

// chains lists every (tenant, chain) with a skip scan of the
// (tenant, chain, seq) index: one seek per chain.
func (s *pgAudit) chains(ctx context.Context) ([]audit.ChainKey, error) {
	rows, err := s.pool.Query(ctx, `
		WITH RECURSIVE c(tenant, chain) AS (
			(SELECT tenant, chain FROM audit_events ORDER BY tenant, chain LIMIT 1)
			UNION ALL
			SELECT n.tenant, n.chain FROM c CROSS JOIN LATERAL (
				SELECT e.tenant, e.chain FROM audit_events e
				WHERE (e.tenant, e.chain) > (c.tenant, c.chain)
				ORDER BY e.tenant, e.chain LIMIT 1
			) n
		)
		SELECT tenant, chain FROM c`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []audit.ChainKey
	for rows.Next() {
		var k audit.ChainKey
		if err := rows.Scan(&k.Tenant, &k.Chain); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// pgPruneTx is audit.PruneTx on a PostgreSQL transaction.
type pgPruneTx struct {
	tx pgx.Tx
	k  audit.ChainKey
}

func (q pgPruneTx) Checkpoint(ctx context.Context) (audit.Checkpoint, bool, error) {
	c := audit.Checkpoint{}
	err := q.tx.QueryRow(ctx, `SELECT tenant, chain, seq, hash, pruned_before_ms, created_ms, checkpoint_hash
		FROM audit_checkpoints WHERE tenant = $1 AND chain = $2`, q.k.Tenant, q.k.Chain).
		Scan(&c.Tenant, &c.Chain, &c.Seq, &c.Hash, &c.PrunedBeforeMS, &c.CreatedMS, &c.CheckpointHash)
	if errors.Is(err, pgx.ErrNoRows) {
		return audit.Checkpoint{}, false, nil
	}
	return c, err == nil, err
}

func (q pgPruneTx) Bounds(ctx context.Context) (first, head int64, ok bool, err error) {
	var lo, hi *int64
	err = q.tx.QueryRow(ctx, `SELECT min(seq), max(seq) FROM audit_events WHERE tenant = $1 AND chain = $2`,
		q.k.Tenant, q.k.Chain).Scan(&lo, &hi)
	if err != nil || lo == nil || hi == nil {
		return 0, 0, false, err
	}
	return *lo, *hi, true, nil
}

func (q pgPruneTx) FirstYoung(ctx context.Context, cutoffMS int64) (int64, bool, error) {
	var seq int64
	err := q.tx.QueryRow(ctx, `SELECT seq FROM audit_events
		WHERE tenant = $1 AND chain = $2 AND time_ms >= $3 ORDER BY seq LIMIT 1`,
		q.k.Tenant, q.k.Chain, cutoffMS).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return seq, err == nil, err
}

func (q pgPruneTx) HashAt(ctx context.Context, seq int64) (string, error) {
	var h string
	err := q.tx.QueryRow(ctx, `SELECT hash FROM audit_events WHERE tenant = $1 AND chain = $2 AND seq = $3`,
		q.k.Tenant, q.k.Chain, seq).Scan(&h)
	if errors.Is(err, pgx.ErrNoRows) {
		// bounds saw rows on both sides of it: a gap.
		return "", fmt.Errorf("%w: tenant %q chain %q has no seq %d", audit.ErrBrokenChain, q.k.Tenant, q.k.Chain, seq)
	}
	return h, err
}

func (q pgPruneTx) DeleteRange(ctx context.Context, first, end int64) (int64, error) {
	tag, err := q.tx.Exec(ctx, `DELETE FROM audit_events WHERE tenant = $1 AND chain = $2 AND seq BETWEEN $3 AND $4`,
		q.k.Tenant, q.k.Chain, first, end)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (q pgPruneTx) PutCheckpoint(ctx context.Context, c audit.Checkpoint) error {
	_, err := q.tx.Exec(ctx, `INSERT INTO audit_checkpoints
		(tenant, chain, seq, hash, pruned_before_ms, created_ms, checkpoint_hash) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (tenant, chain) DO UPDATE SET seq = excluded.seq, hash = excluded.hash,
		pruned_before_ms = excluded.pruned_before_ms, created_ms = excluded.created_ms,
		checkpoint_hash = excluded.checkpoint_hash`,
		c.Tenant, c.Chain, c.Seq, c.Hash, c.PrunedBeforeMS, c.CreatedMS, c.CheckpointHash)
	return err
}

// Checkpoints implements audit.Store.
func (s *pgAudit) Checkpoints(ctx context.Context, tenant string) (map[string]audit.Checkpoint, error) {
	out := map[string]audit.Checkpoint{}
	if hasNUL(tenant) {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT tenant, chain, seq, hash, pruned_before_ms, created_ms, checkpoint_hash
		FROM audit_checkpoints WHERE tenant = $1`, tenant)
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
