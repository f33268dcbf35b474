package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgPruneLockKey names the advisory lock one chain's prune step runs
// under, with the schema, tenant and chain appended: replicas pruning at
// the same time queue per chain instead of racing on its checkpoint.
const pgPruneLockKey = "toolgate/audit/prune/"

// Prune implements Store: one transaction per step of at most pruneBatch
// events of one chain, deleting the rows and moving the checkpoint
// together. Appends go on meanwhile: they only add rows after the head,
// which a prune never touches.
func (s *PostgresStore) Prune(ctx context.Context, cutoff time.Time) (PruneResult, error) {
	chains, err := s.chains(ctx)
	if err != nil {
		return PruneResult{}, err
	}
	cutoffMS := cutoff.UnixMilli()
	return pruneChains(chains, func(k chainKey) (int64, bool, error) {
		tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
		if err != nil {
			return 0, false, err
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended(
			$1 || coalesce(current_schema(), '') || '/' || $2 || '/' || $3, 0))`,
			pgPruneLockKey, k.tenant, k.chain); err != nil {
			return 0, false, err
		}
		n, more, err := pruneStep(ctx, pgPruneTx{tx: tx, k: k}, k.tenant, k.chain,
			cutoffMS, time.Now().UnixMilli(), s.pruneBatchSize())
		if err != nil {
			return 0, false, err
		}
		return n, more, tx.Commit(ctx)
	})
}

func (s *PostgresStore) pruneBatchSize() int64 {
	if s.pruneBatch > 0 {
		return s.pruneBatch
	}
	return pruneBatch
}

// chains lists every (tenant, chain) with a skip scan of the
// (tenant, chain, seq) index: one seek per chain.
func (s *PostgresStore) chains(ctx context.Context) ([]chainKey, error) {
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
	var out []chainKey
	for rows.Next() {
		var k chainKey
		if err := rows.Scan(&k.tenant, &k.chain); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// pgPruneTx is pruneTx on a PostgreSQL transaction.
type pgPruneTx struct {
	tx pgx.Tx
	k  chainKey
}

func (q pgPruneTx) checkpoint(ctx context.Context) (Checkpoint, bool, error) {
	c := Checkpoint{}
	err := q.tx.QueryRow(ctx, `SELECT tenant, chain, seq, hash, pruned_before_ms, created_ms, checkpoint_hash
		FROM audit_checkpoints WHERE tenant = $1 AND chain = $2`, q.k.tenant, q.k.chain).
		Scan(&c.Tenant, &c.Chain, &c.Seq, &c.Hash, &c.PrunedBeforeMS, &c.CreatedMS, &c.CheckpointHash)
	if errors.Is(err, pgx.ErrNoRows) {
		return Checkpoint{}, false, nil
	}
	return c, err == nil, err
}

func (q pgPruneTx) bounds(ctx context.Context) (first, head int64, ok bool, err error) {
	var lo, hi *int64
	err = q.tx.QueryRow(ctx, `SELECT min(seq), max(seq) FROM audit_events WHERE tenant = $1 AND chain = $2`,
		q.k.tenant, q.k.chain).Scan(&lo, &hi)
	if err != nil || lo == nil || hi == nil {
		return 0, 0, false, err
	}
	return *lo, *hi, true, nil
}

func (q pgPruneTx) firstYoung(ctx context.Context, cutoffMS int64) (int64, bool, error) {
	var seq int64
	err := q.tx.QueryRow(ctx, `SELECT seq FROM audit_events
		WHERE tenant = $1 AND chain = $2 AND time_ms >= $3 ORDER BY seq LIMIT 1`,
		q.k.tenant, q.k.chain, cutoffMS).Scan(&seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return seq, err == nil, err
}

func (q pgPruneTx) hashAt(ctx context.Context, seq int64) (string, error) {
	var h string
	err := q.tx.QueryRow(ctx, `SELECT hash FROM audit_events WHERE tenant = $1 AND chain = $2 AND seq = $3`,
		q.k.tenant, q.k.chain, seq).Scan(&h)
	if errors.Is(err, pgx.ErrNoRows) {
		// bounds saw rows on both sides of it: a gap.
		return "", fmt.Errorf("%w: tenant %q chain %q has no seq %d", ErrBrokenChain, q.k.tenant, q.k.chain, seq)
	}
	return h, err
}

func (q pgPruneTx) deleteRange(ctx context.Context, first, end int64) (int64, error) {
	tag, err := q.tx.Exec(ctx, `DELETE FROM audit_events WHERE tenant = $1 AND chain = $2 AND seq BETWEEN $3 AND $4`,
		q.k.tenant, q.k.chain, first, end)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (q pgPruneTx) putCheckpoint(ctx context.Context, c Checkpoint) error {
	_, err := q.tx.Exec(ctx, `INSERT INTO audit_checkpoints
		(tenant, chain, seq, hash, pruned_before_ms, created_ms, checkpoint_hash) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (tenant, chain) DO UPDATE SET seq = excluded.seq, hash = excluded.hash,
		pruned_before_ms = excluded.pruned_before_ms, created_ms = excluded.created_ms,
		checkpoint_hash = excluded.checkpoint_hash`,
		c.Tenant, c.Chain, c.Seq, c.Hash, c.PrunedBeforeMS, c.CreatedMS, c.CheckpointHash)
	return err
}

// Checkpoints implements Store.
func (s *PostgresStore) Checkpoints(ctx context.Context, tenant string) (map[string]Checkpoint, error) {
	out := map[string]Checkpoint{}
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
		var c Checkpoint
		if err := rows.Scan(&c.Tenant, &c.Chain, &c.Seq, &c.Hash, &c.PrunedBeforeMS, &c.CreatedMS, &c.CheckpointHash); err != nil {
			return nil, err
		}
		out[c.Chain] = c
	}
	return out, rows.Err()
}
