package audit_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/store"
)

// A NUL in an indexed field is refused for that event alone; it never
// fails the batch it would have shared with other callers.
func TestNULInAnIndexedFieldIsRefusedAlone(t *testing.T) {
	db, err := store.Open(context.Background(), store.SQLite, filepath.Join(t.TempDir(), "a.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	lg, err := audit.NewLog(db.Audit(), audit.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	bad := &audit.Event{Tenant: "acme", Principal: "a\x00b", Phase: audit.PhaseDecision, Outcome: "allow"}
	if err := lg.Append(context.Background(), bad); !errors.Is(err, audit.ErrInvalidEvent) {
		t.Fatalf("err = %v, want ErrInvalidEvent", err)
	}
	good := &audit.Event{Tenant: "acme", Principal: "a", Phase: audit.PhaseDecision, Outcome: "allow"}
	if err := lg.Append(context.Background(), good); err != nil {
		t.Fatal(err)
	}
}
