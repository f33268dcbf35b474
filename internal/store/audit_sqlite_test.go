package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/audit/storetest"
	"github.com/toolgate/toolgate/internal/tlog"
)

// openSQLite opens a database at path for the test; the test closes it
// itself or leaves it to the cleanup.
func openSQLite(t testing.TB, path string, opts ...Option) *DB {
	t.Helper()
	db, err := Open(context.Background(), SQLite, path, opts...)
	if err != nil {
		t.Fatalf("Open(sqlite): %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// sqliteAuditOf is the concrete audit repository, for the test hooks.
func sqliteAuditOf(db *DB) *sqliteAudit { return db.Audit().(*sqliteAudit) }

func TestSQLiteConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) audit.Store {
		return openSQLite(t, filepath.Join(t.TempDir(), "audit.db")).Audit()
	})
}

func testEvent(tenant, tool string) *audit.Event {
	return &audit.Event{
		Tenant: tenant, Principal: "alice", Tool: tool, Action: "fs.read",
		Phase: audit.PhaseDecision, Outcome: "allow", SessionID: "s-1", CallID: "c-1", DecisionID: "d-1",
		Input: map[string]any{"args": map[string]any{"path": "docs/guide.md"}},
	}
}

func TestSQLiteReopenContinuesTheTree(t *testing.T) {
	ctx := t.Context()
	// A path with characters a naive DSN would misread, in folders that do
	// not exist yet.
	path := filepath.Join(t.TempDir(), "var dir", "a?b#c", "audit.db")
	key, err := tlog.LoadOrCreateSigner(filepath.Join(filepath.Dir(path), "audit-signing.key"), tlog.KeyName)
	if err != nil {
		t.Fatal(err)
	}

	s := openSQLite(t, path)
	l, err := audit.NewLog(s.Audit(), audit.LogOptions{Signer: key})
	if err != nil {
		t.Fatalf("NewLog: %v", err)
	}
	var first []*audit.Event
	for _, tenant := range []string{"acme", "acme", "globex"} {
		ev := testEvent(tenant, "read-file")
		if err := l.Append(ctx, ev); err != nil {
			t.Fatalf("Append: %v", err)
		}
		first = append(first, ev)
	}
	l.Close()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database file: %v", err)
	}

	// The restarted gateway loads the same key file.
	if key, err = tlog.LoadOrCreateSigner(filepath.Join(filepath.Dir(path), "audit-signing.key"), tlog.KeyName); err != nil {
		t.Fatal(err)
	}
	s = openSQLite(t, path)
	defer s.Close()
	l, err = audit.NewLog(s.Audit(), audit.LogOptions{Signer: key})
	if err != nil {
		t.Fatalf("NewLog after reopen: %v", err)
	}
	defer l.Close()
	for _, ev := range first {
		got, err := l.Get(ctx, ev.Tenant, ev.ID)
		if err != nil || got.Hash != ev.Hash {
			t.Fatalf("event %s after reopen: %v (hash %v)", ev.ID, err, got)
		}
	}
	for tenant, want := range map[string]int64{"acme": 2, "globex": 1} {
		ev := testEvent(tenant, "grep")
		if err := l.Append(ctx, ev); err != nil {
			t.Fatal(err)
		}
		if err := l.Sync(ctx, tenant); err != nil {
			t.Fatal(err)
		}
		got, err := l.Get(ctx, tenant, ev.ID)
		if err != nil || got.LogIndex == nil || *got.LogIndex != want {
			t.Fatalf("%s after reopen: log_index %v, %v; want %d", tenant, got.LogIndex, err, want)
		}
		res, err := l.Verify(ctx, tenant)
		if err != nil || !res.OK || res.EventsChecked != int(want)+1 {
			t.Fatalf("Verify(%s) after reopen = %+v, %v", tenant, res, err)
		}
	}
}

func TestSQLiteSchemaIsVersioned(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	s := openSQLite(t, path)
	s.Close()
	s = openSQLite(t, path) // migrations already applied: a no-op
	s.Close()

	// A database from a newer gateway is refused, not silently used.
	raw := openSQLite(t, path)
	if err := sqliteAuditOf(raw).TamperSchemaVersion(t.Context(), 999); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	for _, opts := range [][]Option{nil, {WithoutMigrations()}, {ReadOnly()}} {
		if _, err := Open(t.Context(), SQLite, path, opts...); !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "newer") {
			t.Fatalf("Open(%d options) on a newer schema = %v, want a refusal", len(opts), err)
		}
	}
	if _, err := Migrate(t.Context(), SQLite, path); !errors.Is(err, ErrSchema) {
		t.Fatalf("Migrate on a newer schema = %v, want a refusal", err)
	}
}

func TestSQLiteQueriesUseAnIndexWithoutSorting(t *testing.T) {
	s := sqliteAuditOf(openSQLite(t, filepath.Join(t.TempDir(), "audit.db")))
	set := map[string]func(*audit.Filter){
		"":            func(*audit.Filter) {},
		"tool":        func(f *audit.Filter) { f.Tool = "x" },
		"principal":   func(f *audit.Filter) { f.Principal = "x" },
		"outcome":     func(f *audit.Filter) { f.Outcome = "x" },
		"phase":       func(f *audit.Filter) { f.Phase = "x" },
		"session_id":  func(f *audit.Filter) { f.SessionID = "x" },
		"call_id":     func(f *audit.Filter) { f.CallID = "x" },
		"decision_id": func(f *audit.Filter) { f.DecisionID = "x" },
	}
	for field, index := range PlanIndexes {
		t.Run("filter "+field, func(t *testing.T) {
			var f audit.Filter
			set[field](&f)
			plan, err := s.ExplainQuery(t.Context(), "acme", f)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plan, "USING INDEX "+index) && !strings.Contains(plan, "USING COVERING INDEX "+index) {
				t.Fatalf("plan does not use %s:\n%s", index, plan)
			}
			if strings.Contains(plan, "TEMP B-TREE") {
				t.Fatalf("plan sorts:\n%s", plan)
			}
		})
	}
}

func TestSQLiteStoreErrorsAreUnavailable(t *testing.T) {
	s := openSQLite(t, filepath.Join(t.TempDir(), "audit.db"))
	l, err := audit.NewLog(s.Audit(), audit.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s.Close() // the database goes away under the log
	ctx := context.Background()
	if err := l.Append(ctx, testEvent("acme", "grep")); !errors.Is(err, audit.ErrUnavailable) {
		t.Fatalf("Append on a closed store = %v, want ErrUnavailable", err)
	}
	if _, err := l.Query(ctx, "acme", audit.Filter{}); !errors.Is(err, audit.ErrUnavailable) {
		t.Fatalf("Query on a closed store = %v, want ErrUnavailable", err)
	}
	if err := l.Ping(ctx); !errors.Is(err, audit.ErrUnavailable) {
		t.Fatalf("Ping on a closed store = %v, want ErrUnavailable", err)
	}
	if _, err := l.Verify(ctx, "acme"); !errors.Is(err, audit.ErrUnavailable) {
		t.Fatalf("Verify on a closed store = %v, want ErrUnavailable", err)
	}
}

func TestSQLiteCommitsAreDurable(t *testing.T) {
	s := sqliteAuditOf(openSQLite(t, filepath.Join(t.TempDir(), "audit.db")))
	journal, sync, err := s.WriterPragmas(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if journal != "wal" || sync != 2 {
		t.Fatalf("writer journal_mode=%s synchronous=%d, want wal and 2 (FULL)", journal, sync)
	}
	if ro, err := s.ReaderIsQueryOnly(t.Context()); err != nil || !ro {
		t.Fatalf("read pool query_only = %v, %v; want true", ro, err)
	}
}

// Gateways (or `gateway audit migrate`) starting together on one new file
// take turns: every one succeeds and each migration is recorded once.
func TestSQLiteMigratorsStartingTogetherMigrateOnce(t *testing.T) {
	const migrators = 6
	path := filepath.Join(t.TempDir(), "audit.db")
	errs := make([]error, migrators)
	applied := make([][]string, migrators)
	var wg sync.WaitGroup
	for i := range migrators {
		wg.Go(func() {
			if i%2 == 0 {
				applied[i], errs[i] = Migrate(context.Background(), SQLite, path)
				return
			}
			db, err := Open(context.Background(), SQLite, path)
			if err == nil {
				db.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("migrator %d: %v", i, err)
		}
	}
	db := openSQLite(t, path)
	var rows, versions int
	if err := sqliteAuditOf(db).r.QueryRow(`SELECT count(*), count(DISTINCT version_id) FROM `+versionTable+` WHERE version_id > 0`).Scan(&rows, &versions); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, a := range applied {
		total += len(a)
	}
	want := len(knownVersions(t, SQLite))
	if rows != versions || versions != want || total > versions {
		t.Fatalf("%d version rows for %d versions, %d applied by Migrate; want each of the %d once", rows, versions, total, want)
	}
}
