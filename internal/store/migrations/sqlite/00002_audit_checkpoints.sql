-- +goose Up
-- Retention checkpoints: where pruning cut each (tenant, chain). seq and
-- hash are the last pruned event's; checkpoint_hash covers the other
-- columns (see audit.ComputeCheckpointHash), so an edited row is detected.
CREATE TABLE audit_checkpoints (
	tenant           TEXT    NOT NULL,
	chain            TEXT    NOT NULL,
	seq              INTEGER NOT NULL,
	hash             TEXT    NOT NULL,
	pruned_before_ms INTEGER NOT NULL,
	created_ms       INTEGER NOT NULL,
	checkpoint_hash  TEXT    NOT NULL,
	PRIMARY KEY (tenant, chain)
);
