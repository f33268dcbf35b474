package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/store"
)

// sqliteSchema is every table and index of the database and the versions
// recorded, to tell whether anything changed.
func sqliteSchema(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var b strings.Builder
	for _, q := range []string{
		`SELECT type || ' ' || name || ' ' || coalesce(sql, '') FROM sqlite_master ORDER BY type, name`,
		`SELECT version_id || ' ' || is_applied FROM toolgate_schema_version ORDER BY id`,
	} {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(&b, s)
		}
		rows.Close()
	}
	return b.String()
}

// gateway policy replay only reads: it never creates, migrates or writes
// the database, and says what to do when the schema is not current.
func TestPolicyReplayNeverMigrates(t *testing.T) {
	cfg := writeConfig(t, goodConfig)
	path := filepath.Join(filepath.Dir(cfg), "audit.db")
	replay := []string{"policy", "replay", "--config", cfg, "--policy", "../../policies"}

	// No database yet: an error, and still no database.
	code, _, errs := runCLI(t, replay...)
	if code != 1 || !strings.Contains(errs, "no such file") {
		t.Fatalf("replay without a database: exit %d: %s", code, errs)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("replay created the database: %v", err)
	}

	// A database an older gateway migrated: one migration short.
	if _, err := store.Migrate(context.Background(), store.SQLite, path); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP TABLE store_probe`, `DELETE FROM toolgate_schema_version WHERE version_id = 7`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	before := sqliteSchema(t, path)
	code, _, errs = runCLI(t, replay...)
	if code != 1 || !strings.Contains(errs, "lacks migrations 00007_store_probe.sql") || !strings.Contains(errs, "run `gateway audit migrate`") {
		t.Fatalf("replay of a database one migration short: exit %d: %s", code, errs)
	}
	if after := sqliteSchema(t, path); after != before {
		t.Fatalf("replay changed the schema:\n%s\nwas\n%s", after, before)
	}

	// Migrated, it replays, and still changes nothing.
	if code, out, errs := runCLI(t, "audit", "migrate", "--config", cfg); code != 0 || !strings.Contains(out, "applied migration 00007_store_probe.sql") {
		t.Fatalf("audit migrate: exit %d: %s%s", code, out, errs)
	}
	before = sqliteSchema(t, path)
	if code, out, errs := runCLI(t, replay...); code != 0 || !strings.Contains(out, "decision events 0") {
		t.Fatalf("replay of a current database: exit %d: %s%s", code, out, errs)
	}
	if after := sqliteSchema(t, path); after != before {
		t.Fatalf("replay changed the schema:\n%s\nwas\n%s", after, before)
	}
}
