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
type txBeginner = migrate.TxBeginner

// migratePostgres applies the migrations the database has not seen, in one
// transaction that first takes an advisory lock, so that replicas starting
// together queue instead of racing to create the same tables. The lock
// goes with the transaction, also when the connection dies.
func migratePostgres(ctx context.Context, db txBeginner) (applied []string, err error) {
	ms, err := migrate.Load(postgresMigrations, "migrations/postgres")
	if err != nil {
		return nil, err
	}
	return migrate.ApplyPostgres(ctx, db, migrationsTable, pgMigrateLockKey, ms)
}
