-- Questions of ask-user calls, waiting for the user's answer. request is
-- the immutable JSON (the question, its options and the unmasked request
-- document); the columns are what queries and the conditional transitions
-- use.
CREATE TABLE questions (
	id          TEXT    PRIMARY KEY,
	tenant      TEXT    NOT NULL,
	call_id     TEXT    NOT NULL,
	principal   TEXT    NOT NULL,
	status      TEXT    NOT NULL,
	created_ms  INTEGER NOT NULL,
	expires_ms  INTEGER NOT NULL,
	answered_by TEXT    NOT NULL DEFAULT '',
	answered_ms INTEGER NOT NULL DEFAULT 0,
	answer      TEXT    NOT NULL DEFAULT '',
	request     TEXT    NOT NULL
);

CREATE INDEX questions_status ON questions (tenant, status, expires_ms);
CREATE INDEX questions_call   ON questions (tenant, call_id, created_ms DESC);
