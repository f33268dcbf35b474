-- +goose Up
-- The provable log (issue 13). The hot path now commits each event into a
-- narrow append table (one key, no secondary index); an integrator moves
-- committed events in batches into audit_events, gives each its log_index
-- (its position in the tenant's Merkle tree) and keeps the tree beside it:
-- the compact state and latest signed checkpoint per tenant
-- (audit_trees), and every complete node (audit_tree_nodes, insert only).
--
-- audit_events is rebuilt, because SQLite cannot drop a UNIQUE constraint:
-- the per-chain (tenant, chain, seq) key is what made replicas collide, and
-- new events have no chain (chain '', seq 0). Its rows are kept as they
-- are, with no log_index yet: the integrator puts them into the tree first,
-- in (chain, seq) order, before any new event.
CREATE TABLE audit_append (
	seq         INTEGER PRIMARY KEY, -- commit order
	tenant      TEXT    NOT NULL,
	id          TEXT    NOT NULL,
	call_id     TEXT    NOT NULL,
	decision_id TEXT    NOT NULL,
	raw         TEXT    NOT NULL -- the canonical event, its hash inside
);

CREATE TABLE audit_events_v8 (
	pk          INTEGER PRIMARY KEY,
	tenant      TEXT    NOT NULL,
	log_index   INTEGER, -- NULL only for events of the hash-chain era not yet integrated
	chain       TEXT    NOT NULL,
	seq         INTEGER NOT NULL,
	id          TEXT    NOT NULL,
	time_ms     INTEGER NOT NULL,
	tool        TEXT    NOT NULL,
	principal   TEXT    NOT NULL,
	outcome     TEXT    NOT NULL,
	phase       TEXT    NOT NULL,
	session_id  TEXT    NOT NULL,
	call_id     TEXT    NOT NULL,
	decision_id TEXT    NOT NULL,
	hash        TEXT    NOT NULL,
	raw         TEXT    NOT NULL
);
INSERT INTO audit_events_v8 (pk, tenant, log_index, chain, seq, id, time_ms, tool, principal, outcome, phase,
	session_id, call_id, decision_id, hash, raw)
	SELECT pk, tenant, NULL, chain, seq, id, time_ms, tool, principal, outcome, phase,
		session_id, call_id, decision_id, hash, raw
	FROM audit_events ORDER BY pk;
DROP TABLE audit_events;
ALTER TABLE audit_events_v8 RENAME TO audit_events;

-- Verify, proofs and retention walk the log in order.
CREATE UNIQUE INDEX audit_events_log ON audit_events (tenant, log_index);
-- Get by id. Not unique: ids are UUIDs the log makes, and a duplicate must
-- never stop the integrator.
CREATE INDEX audit_events_id ON audit_events (tenant, id);
-- The hash-chain era's events still to integrate, in chain order; empty
-- once they are.
CREATE INDEX audit_events_legacy ON audit_events (tenant, chain, seq) WHERE log_index IS NULL;
-- The query indexes, as before (migrations 00001 and 00003).
CREATE INDEX audit_events_time        ON audit_events (tenant, time_ms DESC, id DESC);
CREATE INDEX audit_events_tool        ON audit_events (tenant, tool, time_ms DESC, id DESC);
CREATE INDEX audit_events_principal   ON audit_events (tenant, principal, time_ms DESC, id DESC);
CREATE INDEX audit_events_outcome     ON audit_events (tenant, outcome, time_ms DESC, id DESC);
CREATE INDEX audit_events_phase       ON audit_events (tenant, phase, time_ms DESC, id DESC);
CREATE INDEX audit_events_session_id  ON audit_events (tenant, session_id, time_ms DESC, id DESC);
CREATE INDEX audit_events_call_id     ON audit_events (tenant, call_id, time_ms DESC, id DESC);
CREATE INDEX audit_events_decision_id ON audit_events (tenant, decision_id, time_ms DESC, id DESC);
CREATE INDEX audit_events_principal_outcome ON audit_events (tenant, principal, outcome, time_ms DESC, id DESC);

-- One row per tenant with a tree. state is tlog.State.MarshalBinary of the
-- tree of size events; pruned is where retention cut its front.
CREATE TABLE audit_trees (
	tenant           TEXT    PRIMARY KEY,
	size             INTEGER NOT NULL,
	state            BLOB    NOT NULL,
	root             BLOB    NOT NULL,
	pruned           INTEGER NOT NULL DEFAULT 0,
	pruned_before_ms INTEGER NOT NULL DEFAULT 0,
	checkpoint       BLOB,
	checkpoint_size  INTEGER NOT NULL DEFAULT 0,
	checkpoint_ms    INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;

-- Complete tree nodes: level 0 are leaf hashes (log_index = idx), a node at
-- level L covers leaves [idx << L, (idx+1) << L). Never updated.
CREATE TABLE audit_tree_nodes (
	tenant TEXT    NOT NULL,
	level  INTEGER NOT NULL,
	idx    INTEGER NOT NULL,
	hash   BLOB    NOT NULL,
	PRIMARY KEY (tenant, level, idx)
) WITHOUT ROWID;
