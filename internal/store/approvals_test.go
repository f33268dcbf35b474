package store

import (
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/approval"
	"github.com/toolgate/toolgate/internal/approval/approvaltest"
	"github.com/toolgate/toolgate/internal/pgtest"
)

func TestSQLiteApprovalsConformance(t *testing.T) {
	approvaltest.StoreSuite(t, func(t *testing.T) approval.Store {
		return openSQLite(t, filepath.Join(t.TempDir(), "audit.db")).Approvals()
	})
}

func TestPostgresApprovalsConformance(t *testing.T) {
	approvaltest.StoreSuite(t, func(t *testing.T) approval.Store {
		return openPostgresDB(t, pgtest.DSN(t)).Approvals()
	})
}
