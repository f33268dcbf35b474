-- Session task lists. A task is addressed by (tenant, session, id), so a
-- lookup can never reach another session's task. seq is the creation order
-- within the session (List orders by it; timestamps can tie). Keys use the
-- "C" collation: byte comparison, as in SQLite, whatever the locale.
CREATE TABLE tasks (
	tenant      TEXT COLLATE "C" NOT NULL,
	session     TEXT COLLATE "C" NOT NULL,
	id          TEXT COLLATE "C" NOT NULL,
	seq         BIGINT NOT NULL,
	subject     TEXT   NOT NULL,
	description TEXT   NOT NULL,
	status      TEXT   NOT NULL CHECK (status IN ('pending', 'in_progress', 'completed')),
	blocked_by  TEXT[] NOT NULL DEFAULT '{}', -- task ids, in the order given
	owner       TEXT   NOT NULL,              -- principal that created it
	created_ms  BIGINT NOT NULL,              -- unix milliseconds
	updated_ms  BIGINT NOT NULL,
	version     BIGINT NOT NULL,
	PRIMARY KEY (tenant, session, id),
	CONSTRAINT tasks_by_seq UNIQUE (tenant, session, seq)
);
