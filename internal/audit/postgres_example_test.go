package audit_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/toolgate/toolgate/internal/audit"
)

// Each replica opens the shared database and writes its own chain segment;
// Verify on any replica covers them all.
func ExampleOpenPostgres() {
	ctx := context.Background()
	store, err := audit.OpenPostgres(ctx, os.Getenv("TOOLGATE_AUDIT_DSN"), audit.WithMaxConns(8))
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	hostname, _ := os.Hostname()
	l, err := audit.NewLog(store, audit.LogOptions{Chain: "replica-" + hostname})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ev := &audit.Event{Tenant: "acme", Principal: "alice", Tool: "read-file", Action: "fs.read",
		Phase: audit.PhaseDecision, Outcome: "allow", CallID: "c-1", DecisionID: "d-1", SessionID: "s-1"}
	if err := l.Append(ctx, ev); err != nil {
		log.Fatal(err) // ErrUnavailable: fail the call closed
	}
	res, err := l.Verify(ctx, "acme")
	fmt.Println(res.OK, err)
}

// `gateway audit migrate` runs the migrations ahead of the replicas, with
// a role that may change the schema; the replicas then open with
// WithoutMigrations.
func ExampleMigratePostgres() {
	applied, err := audit.MigratePostgres(context.Background(), os.Getenv("TOOLGATE_AUDIT_DSN"))
	if err != nil {
		log.Fatal(err)
	}
	for _, name := range applied {
		fmt.Println("applied", name)
	}
}
