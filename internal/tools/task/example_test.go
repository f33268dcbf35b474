package task_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/tools/task"
)

// The task store lives in the gateway's database (internal/store); the four
// tools share it.
func Example() {
	dir, err := os.MkdirTemp("", "toolgate-task-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	db, err := store.Open(ctx, store.SQLite, filepath.Join(dir, "audit.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ts := task.Tools(db.Tasks(), task.Options{
		Now:   func() time.Time { return time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC) },
		NewID: func() string { return "task_abcdefghijkl" },
	})
	create := ts[0]

	env := &tools.Env{Tenant: "acme", Principal: "alice", SessionID: "s-1"}
	plan, err := create.Prepare(ctx, env, map[string]any{"subject": "Run the unit tests"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(plan.Resources)
	res, err := create.Run(ctx, env, plan.Artifact, create.Spec().Limits)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Content)
	// Output:
	// [map[owner:alice session:s-1 type:task_list]]
	// {"id":"task_abcdefghijkl","subject":"Run the unit tests","description":"","status":"pending","blocked_by":[],"created_at":"2025-03-01T12:00:00.000Z","updated_at":"2025-03-01T12:00:00.000Z"}
}
