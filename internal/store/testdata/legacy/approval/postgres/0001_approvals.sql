-- Calls held for a human. request is the immutable JSON (the unmasked
-- request document among it), kept as the exact bytes written; the columns
-- are what queries and the conditional transitions use.
CREATE TABLE approvals (
	id         TEXT COLLATE "C" PRIMARY KEY,
	tenant     TEXT COLLATE "C" NOT NULL,
	call_id    TEXT COLLATE "C" NOT NULL,
	principal  TEXT COLLATE "C" NOT NULL,
	tool       TEXT COLLATE "C" NOT NULL,
	status     TEXT COLLATE "C" NOT NULL,
	created_ms BIGINT NOT NULL,
	expires_ms BIGINT NOT NULL,
	decided_by TEXT COLLATE "C" NOT NULL DEFAULT '',
	decided_ms BIGINT NOT NULL DEFAULT 0,
	comment    TEXT NOT NULL DEFAULT '',
	outcome    TEXT COLLATE "C" NOT NULL DEFAULT '',
	request    BYTEA NOT NULL,
	result     BYTEA NOT NULL DEFAULT ''
);

CREATE INDEX approvals_status  ON approvals (tenant, status, created_ms DESC, id DESC);
CREATE INDEX approvals_created ON approvals (tenant, created_ms DESC, id DESC);
CREATE INDEX approvals_call    ON approvals (tenant, call_id, created_ms DESC);
