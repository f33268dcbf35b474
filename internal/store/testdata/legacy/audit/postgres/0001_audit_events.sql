-- Audit events: the raw canonical JSON that was hashed, plus the columns
-- queries filter and page on. Verify checks every column against raw.
--
-- raw is BYTEA, not JSONB or TEXT: Verify rehashes the exact bytes that
-- were hashed, and JSONB reorders and reformats them while TEXT is subject
-- to the database encoding. Text columns use the "C" collation, so that
-- ordering and keyset paging compare bytes, as SQLite does, whatever the
-- database's locale.
CREATE TABLE audit_events (
	tenant      TEXT COLLATE "C" NOT NULL,
	chain       TEXT COLLATE "C" NOT NULL,
	seq         BIGINT           NOT NULL,
	id          TEXT COLLATE "C" NOT NULL,
	time_ms     BIGINT           NOT NULL,
	tool        TEXT COLLATE "C" NOT NULL,
	principal   TEXT COLLATE "C" NOT NULL,
	outcome     TEXT COLLATE "C" NOT NULL,
	phase       TEXT COLLATE "C" NOT NULL,
	session_id  TEXT COLLATE "C" NOT NULL,
	call_id     TEXT COLLATE "C" NOT NULL,
	decision_id TEXT COLLATE "C" NOT NULL,
	hash        TEXT COLLATE "C" NOT NULL,
	raw         BYTEA            NOT NULL,
	-- Also the index Heads and Scan walk: (tenant, chain) then seq.
	CONSTRAINT audit_events_chain_seq UNIQUE (tenant, chain, seq),
	CONSTRAINT audit_events_id UNIQUE (id)
);

-- Every filter, combined with the tenant and the newest-first order
-- (time_ms DESC, id DESC), is an index range scan with no sort; the cursor
-- position (time_ms, id) < (..) is an index condition of the same scan.
CREATE INDEX audit_events_time        ON audit_events (tenant, time_ms DESC, id DESC);
CREATE INDEX audit_events_tool        ON audit_events (tenant, tool, time_ms DESC, id DESC);
CREATE INDEX audit_events_principal   ON audit_events (tenant, principal, time_ms DESC, id DESC);
CREATE INDEX audit_events_outcome     ON audit_events (tenant, outcome, time_ms DESC, id DESC);
CREATE INDEX audit_events_phase       ON audit_events (tenant, phase, time_ms DESC, id DESC);
CREATE INDEX audit_events_session_id  ON audit_events (tenant, session_id, time_ms DESC, id DESC);
CREATE INDEX audit_events_call_id     ON audit_events (tenant, call_id, time_ms DESC, id DESC);
CREATE INDEX audit_events_decision_id ON audit_events (tenant, decision_id, time_ms DESC, id DESC);
