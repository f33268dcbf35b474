package task

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"github.com/toolgate/toolgate/internal/migrate"
)

//go:embed migrations/sqlite/*.sql
var sqliteMigrations embed.FS

// migrationsTable is this package's own record of applied migrations. The
// tasks live in the audit database file, whose schema_migrations belongs to
// the audit store; sharing it would make each refuse the other's versions.
const migrationsTable = "task_schema_migrations"

// migrateSQLite applies the migrations db has not seen, in one transaction,
// and refuses a database written by a newer schema.
func migrateSQLite(ctx context.Context, db *sql.DB) error {
	ms, err := migrate.Load(sqliteMigrations, "migrations/sqlite")
	if err != nil {
		return err
	}
	if _, err := migrate.ApplySQLite(ctx, db, migrationsTable, ms); err != nil {
		return fmt.Errorf("task: %w", err)
	}
	return nil
}
