package approval_test

import (
	"testing"

	"github.com/toolgate/toolgate/internal/approval"
	"github.com/toolgate/toolgate/internal/approval/approvaltest"
	"github.com/toolgate/toolgate/internal/pgtest"
)

func TestPostgresStoreConformance(t *testing.T) {
	approvaltest.StoreSuite(t, func(t *testing.T) approval.Store {
		s, err := approval.OpenPostgres(t.Context(), pgtest.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
