-- Calls held for a human. request is the immutable JSON (the unmasked
-- request document among it); the columns are what queries and the
-- conditional transitions use.
CREATE TABLE approvals (
	id         TEXT    PRIMARY KEY,
	tenant     TEXT    NOT NULL,
	call_id    TEXT    NOT NULL,
	principal  TEXT    NOT NULL,
	tool       TEXT    NOT NULL,
	status     TEXT    NOT NULL,
	created_ms INTEGER NOT NULL,
	expires_ms INTEGER NOT NULL,
	decided_by TEXT    NOT NULL DEFAULT '',
	decided_ms INTEGER NOT NULL DEFAULT 0,
	comment    TEXT    NOT NULL DEFAULT '',
	outcome    TEXT    NOT NULL DEFAULT '',
	request    TEXT    NOT NULL,
	result     TEXT    NOT NULL DEFAULT ''
);

CREATE INDEX approvals_status  ON approvals (tenant, status, created_ms DESC, id DESC);
CREATE INDEX approvals_created ON approvals (tenant, created_ms DESC, id DESC);
CREATE INDEX approvals_call    ON approvals (tenant, call_id, created_ms DESC);
