-- +goose Up
-- Idempotency keys (issue 14): a call_id the caller chose, reserved
-- atomically before the call is decided (the primary key), then completed
-- with the response that was answered. fingerprint binds the key to one
-- request (mode, tool, canonical arguments, session, principal); a
-- pending key whose lease_ms passed was abandoned (its gateway stopped).
-- expires_ms is when the key may be pruned (or reserved again).
CREATE TABLE idempotency_keys (
	tenant      TEXT    NOT NULL,
	call_id     TEXT    NOT NULL,
	fingerprint TEXT    NOT NULL,
	decision_id TEXT    NOT NULL, -- of the attempt that holds the key
	state       TEXT    NOT NULL CHECK (state IN ('pending', 'done')),
	created_ms  INTEGER NOT NULL,
	lease_ms    INTEGER NOT NULL,
	expires_ms  INTEGER NOT NULL,
	response    BLOB    NOT NULL DEFAULT '', -- the recorded response (JSON) once done
	PRIMARY KEY (tenant, call_id)
) WITHOUT ROWID;

CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_ms);
