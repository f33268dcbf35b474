-- Questions of ask-user calls, waiting for the user's answer. request is
-- the immutable JSON (the question, its options and the unmasked request
-- document), kept as the exact bytes written; the columns are what queries
-- and the conditional transitions use.
CREATE TABLE questions (
	id          TEXT COLLATE "C" PRIMARY KEY,
	tenant      TEXT COLLATE "C" NOT NULL,
	call_id     TEXT COLLATE "C" NOT NULL,
	principal   TEXT COLLATE "C" NOT NULL,
	status      TEXT COLLATE "C" NOT NULL,
	created_ms  BIGINT NOT NULL,
	expires_ms  BIGINT NOT NULL,
	answered_by TEXT COLLATE "C" NOT NULL DEFAULT '',
	answered_ms BIGINT NOT NULL DEFAULT 0,
	answer      TEXT NOT NULL DEFAULT '',
	request     BYTEA NOT NULL
);

CREATE INDEX questions_status ON questions (tenant, status, expires_ms);
CREATE INDEX questions_call   ON questions (tenant, call_id, created_ms DESC);
