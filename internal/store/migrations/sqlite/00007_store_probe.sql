-- +goose Up
-- One row that readiness rewrites while audit commits are failing: a
-- committed write through the same connection and fsync as an audit batch,
-- that adds no event (see audit.Store.Probe).
CREATE TABLE store_probe (
	id        INTEGER PRIMARY KEY CHECK (id = 1),
	probed_ms INTEGER NOT NULL
);
