package approval

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/toolgate/toolgate/internal/migrate"
)

//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrations embed.FS

// migrationsTable is this package's own record of applied migrations: the
// approvals live in the audit database, whose schema_migrations belongs to
// the audit store.
const migrationsTable = "approval_schema_migrations"

// OpenSQLite opens (creating when missing) the database file at path,
// normally the audit store's, and brings the approval table up to date.
// One connection serves everything: approvals are rare, and the
// conditional updates are atomic also across processes on the same file.
func OpenSQLite(ctx context.Context, path string) (Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("approval: sqlite path: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o750); err != nil {
		return nil, fmt.Errorf("approval: sqlite folder: %w", err)
	}
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs), RawQuery: url.Values{
		"_pragma": {"busy_timeout(5000)", "journal_mode(WAL)", "synchronous(FULL)"},
		"_txlock": {"immediate"},
	}.Encode()}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return nil, fmt.Errorf("approval: open sqlite: %w", err)
	}
	db.SetMaxOpenConns(1)
	db.SetConnMaxLifetime(0)
	ms, err := migrate.Load(migrations, "migrations/sqlite")
	if err == nil {
		_, err = migrate.ApplySQLite(ctx, db, migrationsTable, ms)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("approval: migrate sqlite: %w", err)
	}
	return &sqlStore{db: db}, nil
}
