-- +goose Up
-- Idempotency keys (issue 14); see the SQLite migration of the same
-- number. The primary key is the atomic reservation every replica races
-- on (INSERT … ON CONFLICT).
CREATE TABLE idempotency_keys (
	tenant      TEXT COLLATE "C" NOT NULL,
	call_id     TEXT COLLATE "C" NOT NULL,
	fingerprint TEXT COLLATE "C" NOT NULL,
	decision_id TEXT COLLATE "C" NOT NULL,
	state       TEXT COLLATE "C" NOT NULL CHECK (state IN ('pending', 'done')),
	created_ms  BIGINT NOT NULL,
	lease_ms    BIGINT NOT NULL,
	expires_ms  BIGINT NOT NULL,
	response    BYTEA  NOT NULL DEFAULT '',
	CONSTRAINT idempotency_keys_pkey PRIMARY KEY (tenant, call_id)
);

CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_ms);
