package audit

import (
	"context"
	"fmt"
)

// Test-only retention hooks of both stores, found by storetest through its
// RetentionTamperer interface.

// checkpointColumns are the checkpoint columns a tamper test may rewrite.
var checkpointColumns = map[string]bool{
	"tenant": true, "chain": true, "seq": true, "hash": true,
	"pruned_before_ms": true, "created_ms": true, "checkpoint_hash": true,
}

// TamperCheckpoint overwrites one column of the checkpoint of (tenant, chain).
func (s *SQLiteStore) TamperCheckpoint(ctx context.Context, tenant, chain, column string, value any) error {
	if !checkpointColumns[column] {
		return fmt.Errorf("tamper: unknown checkpoint column %q", column)
	}
	return s.tamper(ctx, `UPDATE audit_checkpoints SET `+column+` = ? WHERE tenant = ? AND chain = ?`, value, tenant, chain)
}

// TamperCheckpointDelete removes the checkpoint of (tenant, chain).
func (s *SQLiteStore) TamperCheckpointDelete(ctx context.Context, tenant, chain string) error {
	return s.tamper(ctx, `DELETE FROM audit_checkpoints WHERE tenant = ? AND chain = ?`, tenant, chain)
}

// SetPruneBatch bounds the events one prune step deletes.
func (s *SQLiteStore) SetPruneBatch(n int64) { s.pruneBatch = n }

// TamperCheckpoint overwrites one column of the checkpoint of (tenant, chain).
func (s *PostgresStore) TamperCheckpoint(ctx context.Context, tenant, chain, column string, value any) error {
	if !checkpointColumns[column] {
		return fmt.Errorf("tamper: unknown checkpoint column %q", column)
	}
	return s.tamper(ctx, `UPDATE audit_checkpoints SET `+column+` = $1 WHERE tenant = $2 AND chain = $3`, value, tenant, chain)
}

// TamperCheckpointDelete removes the checkpoint of (tenant, chain).
func (s *PostgresStore) TamperCheckpointDelete(ctx context.Context, tenant, chain string) error {
	return s.tamper(ctx, `DELETE FROM audit_checkpoints WHERE tenant = $1 AND chain = $2`, tenant, chain)
}

// SetPruneBatch bounds the events one prune step deletes.
func (s *PostgresStore) SetPruneBatch(n int64) { s.pruneBatch = n }
