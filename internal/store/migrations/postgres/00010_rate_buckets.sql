-- +goose Up
-- The token buckets of the rate_limit obligation, shared by every replica:
-- one row per (tenant, key) holding the bucket's theoretical arrival time
-- (GCRA, see internal/ratelimit) in Unix nanoseconds of the database's
-- clock. A row whose tat_ns is in the past is a full bucket, the same as no
-- row: the gateway deletes such rows now and then.
CREATE TABLE rate_buckets (
	tenant TEXT   NOT NULL,
	key    TEXT   NOT NULL,
	tat_ns BIGINT NOT NULL,
	PRIMARY KEY (tenant, key)
);
CREATE INDEX rate_buckets_tat ON rate_buckets (tat_ns);
