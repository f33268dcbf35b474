package approval

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/toolgate/toolgate/internal/migrate"
)

// pgMigrateLockKey names the advisory lock migrations run under, so
// replicas starting together migrate once.
const pgMigrateLockKey = "toolgate/approval/migrate/"

// MigratePostgres brings the approval table of the database named by dsn
// up to date and returns the migrations it applied; OpenPostgres does the
// same at start, this is for `gateway audit migrate`.
func MigratePostgres(ctx context.Context, dsn string) ([]string, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("approval: postgres dsn does not parse")
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("approval: migrate postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	ms, err := migrate.Load(migrations, "migrations/postgres")
	if err != nil {
		return nil, err
	}
	applied, err := migrate.ApplyPostgres(ctx, conn, migrationsTable, pgMigrateLockKey, ms)
	if err != nil {
		return nil, fmt.Errorf("approval: migrate postgres: %w", err)
	}
	return applied, nil
}

// OpenPostgres connects to the database named by dsn (normally the audit
// database; the table goes into the first schema of its search_path) and
// brings the approval table up to date under an advisory lock.
func OpenPostgres(ctx context.Context, dsn string) (Store, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		// pgx's message may quote the DSN, password included.
		return nil, errors.New("approval: postgres dsn does not parse")
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 5 * time.Second
	}
	if _, ok := cfg.RuntimeParams["application_name"]; !ok {
		cfg.RuntimeParams["application_name"] = "toolgate"
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("approval: open postgres: %w", err)
	}
	ms, err := migrate.Load(migrations, "migrations/postgres")
	if err == nil {
		_, err = migrate.ApplyPostgres(ctx, conn, migrationsTable, pgMigrateLockKey, ms)
	}
	conn.Close(context.WithoutCancel(ctx))
	if err != nil {
		return nil, fmt.Errorf("approval: migrate postgres: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(4)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("approval: open postgres: %w", err)
	}
	return &sqlStore{db: db, dollar: true}, nil
}
