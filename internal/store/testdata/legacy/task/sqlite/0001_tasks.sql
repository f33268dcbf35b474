-- Session task lists. A task is addressed by (tenant, session, id), so a
-- lookup can never reach another session's task. seq is the creation order
-- within the session (List orders by it; timestamps can tie).
CREATE TABLE tasks (
	tenant      TEXT    NOT NULL,
	session     TEXT    NOT NULL,
	id          TEXT    NOT NULL,
	seq         INTEGER NOT NULL,
	subject     TEXT    NOT NULL,
	description TEXT    NOT NULL,
	status      TEXT    NOT NULL CHECK (status IN ('pending', 'in_progress', 'completed')),
	blocked_by  TEXT    NOT NULL DEFAULT '[]', -- JSON array of task ids
	owner       TEXT    NOT NULL,              -- principal that created it
	created_ms  INTEGER NOT NULL,              -- unix milliseconds
	updated_ms  INTEGER NOT NULL,
	version     INTEGER NOT NULL,
	PRIMARY KEY (tenant, session, id)
) WITHOUT ROWID;

CREATE UNIQUE INDEX tasks_by_seq ON tasks (tenant, session, seq);
