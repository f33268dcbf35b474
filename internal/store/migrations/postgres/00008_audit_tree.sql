-- +goose Up
-- The provable log (issue 13); see the SQLite migration of the same
-- number. The hot path commits into audit_append (one key; seq from an
-- identity, so concurrent replicas never collide); the integrator of each
-- tenant (whichever replica holds its advisory lock) moves events into
-- audit_events with their log_index and keeps the tree beside them.
CREATE TABLE audit_append (
	tenant      TEXT COLLATE "C" NOT NULL,
	seq         BIGINT GENERATED ALWAYS AS IDENTITY,
	id          TEXT COLLATE "C" NOT NULL,
	call_id     TEXT COLLATE "C" NOT NULL,
	decision_id TEXT COLLATE "C" NOT NULL,
	raw         BYTEA            NOT NULL, -- the canonical event, its hash inside
	CONSTRAINT audit_append_pkey PRIMARY KEY (tenant, seq)
);
-- A queue: every row is deleted within a second or so. Dead rows would
-- slow the lookups by call_id and decision_id, which scan the tenant's
-- rows; the integrator vacuums it as it goes, and autovacuum does not
-- wait for a fifth of the table to be dead.
ALTER TABLE audit_append SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000,
	autovacuum_vacuum_cost_delay = 0);

-- Events keep their rows; those of the hash-chain era get their log_index
-- from the integrator, in (chain, seq) order, before any new event. The
-- per-chain key made replicas collide and goes; ids stay indexed, not
-- unique (a duplicate must never stop the integrator).
ALTER TABLE audit_events ADD COLUMN log_index BIGINT;
ALTER TABLE audit_events DROP CONSTRAINT audit_events_chain_seq;
ALTER TABLE audit_events DROP CONSTRAINT audit_events_id;
CREATE UNIQUE INDEX audit_events_log ON audit_events (tenant, log_index);
CREATE INDEX audit_events_id ON audit_events (tenant, id);
CREATE INDEX audit_events_legacy ON audit_events (tenant, chain, seq) WHERE log_index IS NULL;

CREATE TABLE audit_trees (
	tenant           TEXT COLLATE "C" PRIMARY KEY,
	size             BIGINT NOT NULL,
	state            BYTEA  NOT NULL,
	root             BYTEA  NOT NULL,
	pruned           BIGINT NOT NULL DEFAULT 0,
	pruned_before_ms BIGINT NOT NULL DEFAULT 0,
	checkpoint       BYTEA,
	checkpoint_size  BIGINT NOT NULL DEFAULT 0,
	checkpoint_ms    BIGINT NOT NULL DEFAULT 0
);

CREATE TABLE audit_tree_nodes (
	tenant TEXT COLLATE "C" NOT NULL,
	level  SMALLINT NOT NULL,
	idx    BIGINT   NOT NULL,
	hash   BYTEA    NOT NULL,
	CONSTRAINT audit_tree_nodes_pkey PRIMARY KEY (tenant, level, idx)
);
