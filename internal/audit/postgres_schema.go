package audit

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"github.com/toolgate/toolgate/internal/migrate"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/postgres/*.sql
var postgresMigrations embed.FS

// pgMigrationsTable records the applied audit migrations. Not plain
// schema_migrations: a PostgreSQL schema is often shared with other
// applications (and with the task store), each with its own versions.
const pgMigrationsTable = "audit_schema_migrations"

// pgMigrateLockKey names the advisory lock migrations run under; it is
// combined with the schema, so that gateways in different schemas of one
// database do not wait for each other.
const pgMigrateLockKey = "toolgate/audit/migrate/"

// MigratePostgres brings the audit schema of the database named by dsn up
// to date and returns the names of the migrations it applied (none when it
// already was). It is what OpenPostgres does at start, for `gateway audit
// migrate` and for deployments whose gateway role may not change the
// schema. It refuses a schema written by a newer gateway.
func MigratePostgres(ctx context.Context, dsn string) (applied []string, err error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("audit: postgres dsn does not parse")
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = defaultConnectTimeout
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "toolgate-migrate"
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("audit: migrate postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	applied, err = migratePostgres(ctx, conn)
	if err != nil {
		return nil, fmt.Errorf("audit: migrate postgres: %w", err)
	}
	return applied, nil
}

// txBeginner is a *pgx.Conn or a *pgxpool.Pool.
type txBeginner = migrate.TxBeginner

// migratePostgres applies the migrations the database has not seen, all
// in one transaction (PostgreSQL DDL is transactional: a failed step
// leaves nothing behind). The transaction first takes an advisory lock, so
// that concurrent migrators queue instead of racing to create the same
// tables; the lock goes with the transaction, also when the connection
// dies.
func migratePostgres(ctx context.Context, db txBeginner) (applied []string, err error) {
	ms, err := migrate.Load(postgresMigrations, "migrations/postgres")
	if err != nil {
		return nil, err
	}
	return migrate.ApplyPostgres(ctx, db, pgMigrationsTable, pgMigrateLockKey, ms)
}

// checkPostgresSchema verifies, without changing anything, that the
// database is at this gateway's schema version.
func checkPostgresSchema(ctx context.Context, db txBeginner) error {
	ms, err := migrate.Load(postgresMigrations, "migrations/postgres")
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	current, err := pgSchemaVersion(ctx, tx)
	if err != nil {
		return fmt.Errorf("reading the schema version (run `gateway audit migrate`): %w", err)
	}
	want := 0
	if n := len(ms); n > 0 {
		want = ms[n-1].Version
	}
	switch {
	case current > want:
		return fmt.Errorf("database schema version %d is newer than this gateway's (%d)", current, want)
	case current < want:
		return fmt.Errorf("database schema version %d is older than this gateway's (%d): run `gateway audit migrate`", current, want)
	}
	return nil
}

func pgSchemaVersion(ctx context.Context, tx pgx.Tx) (int, error) {
	var v int
	err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+pgMigrationsTable).Scan(&v)
	return v, err
}
