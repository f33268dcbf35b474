-- Audit events: the raw canonical JSON that was hashed, plus the columns
-- queries filter and page on. Verify checks every column against raw.
CREATE TABLE audit_events (
	pk          INTEGER PRIMARY KEY,
	tenant      TEXT    NOT NULL,
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
	raw         TEXT    NOT NULL,
	UNIQUE (tenant, chain, seq),
	UNIQUE (id)
);

-- Every filter, combined with the tenant and the newest-first order
-- (time_ms DESC, id DESC), is an index range scan with no sort.
CREATE INDEX audit_events_time        ON audit_events (tenant, time_ms DESC, id DESC);
CREATE INDEX audit_events_tool        ON audit_events (tenant, tool, time_ms DESC, id DESC);
CREATE INDEX audit_events_principal   ON audit_events (tenant, principal, time_ms DESC, id DESC);
CREATE INDEX audit_events_outcome     ON audit_events (tenant, outcome, time_ms DESC, id DESC);
CREATE INDEX audit_events_phase       ON audit_events (tenant, phase, time_ms DESC, id DESC);
CREATE INDEX audit_events_session_id  ON audit_events (tenant, session_id, time_ms DESC, id DESC);
CREATE INDEX audit_events_call_id     ON audit_events (tenant, call_id, time_ms DESC, id DESC);
CREATE INDEX audit_events_decision_id ON audit_events (tenant, decision_id, time_ms DESC, id DESC);
