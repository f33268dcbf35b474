package store_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/toolgate/toolgate/internal/approval"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/tlog"
)

// Open the embedded database, start the audit log on its audit repository,
// and hold a call: its decision event and its approval commit together.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "store-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	db, err := store.Open(ctx, store.SQLite, filepath.Join(dir, "var", "audit.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	// The key that signs the log's checkpoints lives beside the database
	// (share it between replicas).
	key, err := tlog.LoadOrCreateSigner(filepath.Join(dir, "var", "audit-signing.key"), tlog.KeyName)
	if err != nil {
		log.Fatal(err)
	}
	lg, err := audit.NewLog(db.Audit(), audit.LogOptions{Signer: key})
	if err != nil {
		log.Fatal(err)
	}
	defer lg.Close()

	now := time.Now()
	held := &approval.Approval{ID: "ap-1", Tenant: "acme", CallID: "c-1", Principal: "alice", Tool: "write-file",
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	ev := &audit.Event{Tenant: "acme", Principal: "alice", CallID: "c-1", Tool: "write-file",
		Phase: audit.PhaseDecision, Outcome: "approval_required", Approval: &audit.ApprovalInfo{ID: held.ID}}
	if err := lg.AppendWith(ctx, ev, held); err != nil { // both or neither
		log.Fatal(err)
	}
	a, err := db.Approvals().Get(ctx, "acme", "ap-1")
	fmt.Println(ev.Hash != "", a.Status, err)
	// Output: true pending <nil>
}

// `gateway audit migrate` applies the migrations ahead of the replicas,
// with a role that may change the schema; gateways whose role may not
// then open with WithoutMigrations.
func ExampleMigrate() {
	ctx := context.Background()
	dsn := os.Getenv("TOOLGATE_DSN") // postgres://toolgate@db.internal/toolgate
	applied, err := store.Migrate(ctx, store.Postgres, dsn)
	if err != nil {
		log.Fatal(err)
	}
	for _, name := range applied {
		fmt.Println("applied", name)
	}
	db, err := store.Open(ctx, store.Postgres, dsn, store.WithoutMigrations())
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
}
