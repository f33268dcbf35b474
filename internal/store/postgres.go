package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
)

// PostgreSQL: one pgx pool serves every repository. The audit log, the
// approvals, the tasks and the idempotency keys share their code with
// SQLite and reach the pool through database/sql (stdlib.OpenDBFromPool);
// only the rate limiter, which exists on PostgreSQL alone, uses pgx
// directly. The tables go into the first schema of the DSN's search_path.

// errBadDSN never quotes the DSN: pgx's message may, password included.
var errBadDSN = errors.New("store: postgres dsn does not parse")

// migrateLockKey names the session advisory lock migrations run under; it
// is combined with the schema, so that gateways in different schemas of
// one database do not wait for each other.
const migrateLockKey = "toolgate/store/migrate/"

// migratePostgres migrates on connections of its own, holding the
// migration lock on one of them while goose works on another.
func migratePostgres(ctx context.Context, dsn string, o options) ([]string, error) {
	// Parsed as the pool parses it, so that pool_* settings in the DSN
	// are understood rather than sent to the server.
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, errBadDSN
	}
	cfg := pcfg.ConnConfig
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = o.connectTimeout
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "toolgate-migrate"
	}
	db := stdlib.OpenDB(*cfg)
	defer db.Close()

	lock, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: migrate postgres: %w", err)
	}
	defer lock.Close()
	const key = `hashtextextended($1 || coalesce(current_schema(), ''), 0)`
	if _, err := lock.ExecContext(ctx, `SELECT pg_advisory_lock(`+key+`)`, migrateLockKey); err != nil {
		return nil, fmt.Errorf("store: migrate postgres: lock: %w", err)
	}
	// The lock goes with the session: also when the connection dies.
	defer lock.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(`+key+`)`, migrateLockKey)

	applied, err := postgresDialect.migrate(ctx, db, o.logger)
	if err != nil {
		return applied, fmt.Errorf("store: migrate postgres: %w", err)
	}
	return applied, nil
}

// openPostgresDSN connects to the database named by dsn.
func openPostgresDSN(ctx context.Context, dsn string, o options) (*DB, error) {
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, errBadDSN
	}
	if o.maxConns > 0 {
		pcfg.MaxConns = o.maxConns
	}
	if pcfg.ConnConfig.ConnectTimeout == 0 {
		pcfg.ConnConfig.ConnectTimeout = o.connectTimeout
	}
	if _, ok := pcfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		pcfg.ConnConfig.RuntimeParams["application_name"] = "toolgate"
	}
	if o.mode == modeReadOnly {
		// The server refuses any write in any transaction of this pool.
		pcfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	if o.mode == modeMigrate {
		if _, err := migratePostgres(ctx, dsn, o); err != nil {
			return nil, err
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("store: open postgres: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	if o.mode != modeMigrate {
		if err := checkPostgres(ctx, db); err != nil {
			db.Close()
			pool.Close()
			return nil, err
		}
	}
	return &DB{
		driver:    Postgres,
		audit:     newPgAudit(db, pool, o.writeTimeout),
		approvals: &approvals{w: db, r: db, dollar: true},
		tasks:     newTasks(db, db, postgresTasks),
		keys:      &idempotencyKeys{w: db, r: db, dollar: true},
		limiter:   &pgLimiter{pool: pool, timeout: o.writeTimeout},
		close: func() error {
			err := db.Close()
			pool.Close() // waits for connections in use to be released
			return err
		},
	}, nil
}

// checkPostgres verifies the schema in a read-only transaction.
func checkPostgres(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("store: open postgres: %w", err)
	}
	defer tx.Rollback()
	if err := postgresDialect.check(ctx, tx); err != nil {
		return fmt.Errorf("store: open postgres: %w", err)
	}
	return nil
}
