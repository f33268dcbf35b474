-- +goose Up
-- The API's principal + outcome filter as one index range scan (see the
-- SQLite migration of the same number).
CREATE INDEX audit_events_principal_outcome ON audit_events (tenant, principal, outcome, time_ms DESC, id DESC);
