package approval_test

import (
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/approval"
	"github.com/toolgate/toolgate/internal/approval/approvaltest"
	"github.com/toolgate/toolgate/internal/audit"
)

func TestSQLiteStoreConformance(t *testing.T) {
	approvaltest.StoreSuite(t, func(t *testing.T) approval.Store {
		s, err := approval.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "audit.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// The approvals share the audit database file, each with its own
// migrations table, whichever opens first.
func TestTheStoreSharesTheAuditDatabaseFile(t *testing.T) {
	for _, approvalsFirst := range []bool{true, false} {
		path := filepath.Join(t.TempDir(), "audit.db")
		var s approval.Store
		var err error
		if approvalsFirst {
			if s, err = approval.OpenSQLite(t.Context(), path); err != nil {
				t.Fatal(err)
			}
		}
		as, err := audit.OpenSQLite(t.Context(), path)
		if err != nil {
			t.Fatalf("audit.OpenSQLite (approvals first: %v): %v", approvalsFirst, err)
		}
		if !approvalsFirst {
			if s, err = approval.OpenSQLite(t.Context(), path); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Create(t.Context(), approvaltest.Pending("a1", "acme", "c1", 0, 1e12)); err != nil {
			t.Fatal(err)
		}
		s.Close()
		as.Close()
	}
}
