package store

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/audit/storetest"
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
