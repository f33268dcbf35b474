package audit_test

import (
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/store"
)

// openSQLite opens the audit store of a fresh SQLite database at path; the
// database closes when the test ends.
func openSQLite(t *testing.T, path string) audit.Store {
	t.Helper()
	db, err := store.Open(t.Context(), store.SQLite, path)
	if err != nil {
		t.Fatalf("store.Open: %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db.Audit()
}
