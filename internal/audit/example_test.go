package audit_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/tlog"
)

// A Log on the embedded SQLite store: append a decision event with a masked
// input, read it back, integrate it into the tenant's Merkle tree (the
// integrator does within a fraction of a second; Sync does it now), and
// verify the tenant's log.
func ExampleLog() {
	dir, _ := os.MkdirTemp("", "audit-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	db, err := store.Open(ctx, store.SQLite, filepath.Join(dir, "audit.db"))
	if err != nil {
		panic(err)
	}
	defer db.Close()
	key, err := tlog.LoadOrCreateSigner(filepath.Join(dir, "audit-signing.key"), tlog.KeyName)
	if err != nil {
		panic(err)
	}
	log, err := audit.NewLog(db.Audit(), audit.LogOptions{Signer: key})
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
	got, _ := log.Get(ctx, "acme", ev.ID) // found at once, by id, call or decision
	fmt.Println(got.Hash == ev.Hash, got.Input["args"])

	if err := log.Sync(ctx, "acme"); err != nil {
		panic(err)
	}
	got, _ = log.Get(ctx, "acme", ev.ID)
	fmt.Println("log_index", *got.LogIndex)

	res, _ := log.Verify(ctx, "acme")
	fmt.Println(res.OK, res.EventsChecked)
	note, _ := log.Checkpoint(ctx, "acme") // the signed checkpoint an auditor keeps
	fmt.Println(strings.SplitN(string(note), "\n", 2)[0])
	// Output:
	// true map[content:**masked** path:.env]
	// log_index 0
	// true 1
	// toolgate/acme

}
