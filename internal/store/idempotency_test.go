package store

import (
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/idempotency"
	"github.com/toolgate/toolgate/internal/idempotency/idemtest"
	"github.com/toolgate/toolgate/internal/pgtest"
)

func TestSQLiteIdempotencyConformance(t *testing.T) {
	idemtest.StoreSuite(t, func(t *testing.T) idempotency.Store {
		return openSQLite(t, filepath.Join(t.TempDir(), "audit.db")).Idempotency()
	})
}

func TestPostgresIdempotencyConformance(t *testing.T) {
	idemtest.StoreSuite(t, func(t *testing.T) idempotency.Store {
		return openPostgresDB(t, pgtest.DSN(t)).Idempotency()
	})
}
