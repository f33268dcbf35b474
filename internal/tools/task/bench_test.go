package task_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/toolgate/toolgate/internal/tools/task"
)

// BenchmarkTaskCreate measures Prepare+Run of task-create with one
// dependency: one lookup at prepare, one durable (synchronous=FULL) write
// transaction at run. A new session every 50 tasks keeps under the limit
// (its first task, the dependency, is one extra create per 50).
func BenchmarkTaskCreate(b *testing.B) {
	f := newFixture(b, task.Options{})
	tool := f.tools["task-create"]
	ctx := context.Background()
	i := 0
	var dep string
	b.ReportAllocs()
	for b.Loop() {
		e := env("acme", "s-"+strconv.Itoa(i/50))
		if i%50 == 0 {
			dep = f.mustTask(b, "task-create", e, `{"subject":"first"}`).ID
		}
		i++
		args := map[string]any{"subject": "Run the unit tests", "description": "go test ./...", "blocked_by": []any{dep}}
		plan, err := tool.Prepare(ctx, e, args)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tool.Run(ctx, e, plan.Artifact, tool.Spec().Limits); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTaskGet measures Prepare+Run of task-get in a session of 50
// tasks: two primary-key lookups and the JSON rendering.
func BenchmarkTaskGet(b *testing.B) {
	f := newFixture(b, task.Options{})
	e := env("acme", "s-1")
	var id string
	for i := range 50 {
		id = f.mustTask(b, "task-create", e, `{"subject":"task `+strconv.Itoa(i)+`","description":"some words"}`).ID
	}
	tool := f.tools["task-get"]
	args := map[string]any{"task_id": id}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		plan, err := tool.Prepare(ctx, e, args)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tool.Run(ctx, e, plan.Artifact, tool.Spec().Limits); err != nil {
			b.Fatal(err)
		}
	}
}
