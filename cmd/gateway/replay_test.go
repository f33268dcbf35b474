package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/gateway"
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

// With --fail-on-change, a candidate that decides an audited decision
// otherwise fails the command (for CI); without it, or when nothing
// changes, the exit is 0.
func TestPolicyReplayFailOnChange(t *testing.T) {
	cfgFile := writeConfig(t, goodConfig)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(filepath.Dir(cfgFile), "ws", "a.txt"), []byte("a\n"), 0o644))
	cfg, err := config.Load(cfgFile)
	must(err)
	g, err := gateway.New(context.Background(), cfg, nil)
	must(err)
	secret, err := auth.ReadHS256Secret(filepath.Join(filepath.Dir(cfgFile), "secret"))
	must(err)
	tok, err := auth.MintHS256(secret, auth.MintClaims{Tenant: "acme", Subject: "alice", Roles: []string{"developer"}, TTL: time.Hour}, time.Now())
	must(err)
	req := httptest.NewRequest("POST", "/v1/tools/read-file/calls", strings.NewReader(`{"arguments":{"path":"a.txt"}}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	g.Handler().ServeHTTP(rec, req)
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"outcome":"ok"`) {
		t.Fatalf("the call to replay: %d %s", rec.Code, rec.Body)
	}
	must(g.Close())

	denyAll := filepath.Join(t.TempDir(), "deny")
	must(os.CopyFS(denyAll, os.DirFS("../../policies")))
	must(os.WriteFile(filepath.Join(denyAll, "authz.rego"), []byte("package toolgate.authz\n\ndecision := {\"allow\": false, \"reasons\": [\"frozen\"]}\n"), 0o644))
	abs, _ := filepath.Abs("../../policies")
	base := []string{"policy", "replay", "--config", cfgFile}
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"the same policy", append(base, "--policy", abs, "--fail-on-change"), 0, "changed 0", ""},
		{"a candidate that denies, reported", append(base, "--policy", denyAll), 0, "changed 1", ""},
		{"a candidate that denies, for CI", append(base, "--policy", denyAll, "--fail-on-change"), 1, "changed 1", "1 decision(s) change under the candidate"},
		{"as JSON, for CI", append(base, "--policy", denyAll, "--fail-on-change", "--json"), 1, `"changed": 1`, "(--fail-on-change)"},
	} {
		code, out, errs := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(out, tc.stdout) || !strings.Contains(errs, tc.stderr) {
			t.Errorf("%s: exit %d, want %d:\n%s%s", tc.name, code, tc.code, out, errs)
		}
	}
}
