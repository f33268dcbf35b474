package audit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/store"
)

// A Log on the embedded SQLite store: append a decision event with a masked
// input, read it back, and verify the tenant's chain.
func ExampleLog() {
	dir, _ := os.MkdirTemp("", "audit-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	db, err := store.Open(ctx, store.SQLite, filepath.Join(dir, "audit.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	log, err := audit.NewLog(db.Audit(), audit.LogOptions{})
	if err != nil {
		panic(err)
	}
	defer log.Close()

	doc := map[string]any{"args": map[string]any{"path": ".env", "content": "API_KEY=secret"}}
	ev := &audit.Event{
		Tenant: "acme", Principal: "alice", Tool: "write-file", Action: "fs.write",
		Phase: audit.PhaseDecision, Outcome: "allow",
		Input: audit.Mask(doc, []string{"/args/content"}),
	}
	if err := log.Append(ctx, ev); err != nil { // durable when it returns
		panic(err)
	}
	got, _ := log.Get(ctx, "acme", ev.ID)
	fmt.Println(got.Seq, got.PrevHash == "", got.Input["args"])

	res, _ := log.Verify(ctx, "acme")
	fmt.Println(res.OK, res.EventsChecked)
	// Output:
	// 1 true map[content:**masked** path:.env]
	// true 1
}
