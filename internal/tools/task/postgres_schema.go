package task

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"github.com/toolgate/toolgate/internal/migrate"
	"time"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/postgres/*.sql
var postgresMigrations embed.FS

// pgMigrateLockKey names the advisory lock migrations run under; it is
// combined with the schema, so that gateways in different schemas of one
// database do not wait for each other.
const pgMigrateLockKey = "toolgate/task/migrate/"

// pgConnectTimeout bounds connecting when the DSN does not.
const pgConnectTimeout = 5 * time.Second

// MigratePostgres brings the task tables of the database named by dsn up
// to date and returns the names of the migrations it applied (none when
// they already were). OpenPostgres does the same at start; this is for a
// migrate command run ahead of the gateways. It refuses a schema written
// by a newer gateway.
func MigratePostgres(ctx context.Context, dsn string) (applied []string, err error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// pgx's message may quote the DSN, password included.
		return nil, errors.New("task: postgres dsn does not parse")
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = pgConnectTimeout
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "toolgate-migrate"
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("task: migrate postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	applied, err = migratePostgres(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("task: migrate postgres: %w", err)
	}
	return applied, nil
}

// txBeginner is a *pgx.Conn or a *pgxpool.Pool.
type txBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// migratePostgres applies the migrations the database has not seen, in one
// transaction that first takes an advisory lock, so that replicas starting
// together queue instead of racing to create the same tables. The lock
// goes with the transaction, also when the connection dies.
func migratePostgres(ctx context.Context, db txBeginner) (applied []string, err error) {
	ms, err := migrate.Load(postgresMigrations, "migrations/postgres")
	if err != nil {
		return nil, err
	}
	tx, err := db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1 || coalesce(current_schema(), ''), 0))`,
		pgMigrateLockKey); err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+migrationsTable+` (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
		return nil, err
	}
	var current int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+migrationsTable).Scan(&current); err != nil {
		return nil, err
	}
	if n := len(ms); n > 0 && current > ms[n-1].Version {
		return nil, fmt.Errorf("database schema version %d is newer than this gateway's (%d)", current, ms[n-1].Version)
	}
	for _, m := range ms {
		if m.Version <= current {
			continue
		}
		// No arguments: the simple protocol, which runs a multi-statement file.
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return nil, fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+migrationsTable+` (version, name) VALUES ($1, $2)`,
			m.Version, m.Name); err != nil {
			return nil, err
		}
		applied = append(applied, m.Name)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, err
	}
	return applied, nil
}
