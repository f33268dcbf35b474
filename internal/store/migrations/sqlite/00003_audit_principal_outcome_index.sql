-- +goose Up
-- "What was this principal denied?" — the API's principal + outcome filter.
-- Without it SQLite walks the outcome index for a rare principal's rows
-- (p95 ≈190 ms at 1M events, bench/auditquery); with it ≈3 ms.
CREATE INDEX audit_events_principal_outcome ON audit_events (tenant, principal, outcome, time_ms DESC, id DESC);
