package task

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"github.com/toolgate/toolgate/internal/migrate"
	"time"
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
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+migrationsTable+` (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TEXT NOT NULL)`); err != nil {
		return err
	}
	var current int
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM `+migrationsTable).Scan(&current); err != nil {
		return err
	}
	if n := len(ms); n > 0 && current > ms[n-1].Version {
		return fmt.Errorf("task: database schema version %d is newer than this gateway's (%d)", current, ms[n-1].Version)
	}
	for _, m := range ms {
		if m.Version <= current {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("task: migration %s: %w", m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+migrationsTable+` (version, name, applied_at) VALUES (?, ?, ?)`,
			m.Version, m.Name, time.Now().UTC().Format(time.RFC3339)); err != nil {
			return err
		}
	}
	return tx.Commit()
}
