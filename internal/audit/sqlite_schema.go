package audit

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"github.com/toolgate/toolgate/internal/migrate"
)

//go:embed migrations/sqlite/*.sql
var sqliteMigrations embed.FS

// migrateSQLite applies the migrations db has not seen, in one transaction,
// and refuses a database written by a newer schema.
func migrateSQLite(ctx context.Context, db *sql.DB) error {
	ms, err := migrate.Load(sqliteMigrations, "migrations/sqlite")
	if err != nil {
		return err
	}
	if _, err := migrate.ApplySQLite(ctx, db, "schema_migrations", ms); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}
