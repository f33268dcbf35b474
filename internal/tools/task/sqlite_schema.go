package task

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations/sqlite/*.sql
var sqliteMigrations embed.FS

// migrationsTable is this package's own record of applied migrations. The
// tasks live in the audit database file, whose schema_migrations belongs to
// the audit store; sharing it would make each refuse the other's versions.
const migrationsTable = "task_schema_migrations"

// migration is one numbered schema step, "NNNN_name.sql".
type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("task: migration %q: name must be NNNN_name.sql", e.Name())
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("task: migrations %q and %q share a version", out[i-1].name, out[i].name)
		}
	}
	return out, nil
}

// migrateSQLite applies the migrations db has not seen, in one transaction,
// and refuses a database written by a newer schema.
func migrateSQLite(ctx context.Context, db *sql.DB) error {
	ms, err := loadMigrations(sqliteMigrations, "migrations/sqlite")
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
	if n := len(ms); n > 0 && current > ms[n-1].version {
		return fmt.Errorf("task: database schema version %d is newer than this gateway's (%d)", current, ms[n-1].version)
	}
	for _, m := range ms {
		if m.version <= current {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("task: migration %s: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO `+migrationsTable+` (version, name, applied_at) VALUES (?, ?, ?)`,
			m.version, m.name, time.Now().UTC().Format(time.RFC3339)); err != nil {
			return err
		}
	}
	return tx.Commit()
}
