-- +goose Up
-- Retention checkpoints: where pruning cut each (tenant, chain). seq and
-- hash are the last pruned event's; checkpoint_hash covers the other
-- columns (see audit.ComputeCheckpointHash), so an edited row is detected.
CREATE TABLE audit_checkpoints (
	tenant           TEXT COLLATE "C" NOT NULL,
	chain            TEXT COLLATE "C" NOT NULL,
	seq              BIGINT           NOT NULL,
	hash             TEXT COLLATE "C" NOT NULL,
	pruned_before_ms BIGINT           NOT NULL,
	created_ms       BIGINT           NOT NULL,
	checkpoint_hash  TEXT COLLATE "C" NOT NULL,
	CONSTRAINT audit_checkpoints_pkey PRIMARY KEY (tenant, chain)
);
