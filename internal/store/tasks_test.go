package store

import (
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/pgtest"
	"github.com/toolgate/toolgate/internal/tools/task"
	"github.com/toolgate/toolgate/internal/tools/task/tasktest"
)

func TestSQLiteTasksConformance(t *testing.T) {
	tasktest.StoreSuite(t, func(t *testing.T) task.Store {
		return openSQLite(t, filepath.Join(t.TempDir(), "audit.db")).Tasks()
	})
}

func TestPostgresTasksConformance(t *testing.T) {
	tasktest.StoreSuite(t, func(t *testing.T) task.Store {
		return openPostgresDB(t, pgtest.DSN(t)).Tasks()
	})
}
