-- +goose Up
-- The token buckets of the rate_limit obligation (see the PostgreSQL
-- migration). A gateway on SQLite is one process and counts its buckets in
-- memory (internal/ratelimit.Memory): the table exists so that both
-- drivers have the same versions and tables, and stays empty.
CREATE TABLE rate_buckets (
	tenant TEXT    NOT NULL,
	key    TEXT    NOT NULL,
	tat_ns INTEGER NOT NULL,
	PRIMARY KEY (tenant, key)
);
CREATE INDEX rate_buckets_tat ON rate_buckets (tat_ns);
