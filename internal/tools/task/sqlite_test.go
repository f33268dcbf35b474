package task_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/tools/task"
)

func TestTasksSurviveClosingAndReopeningTheStore(t *testing.T) {
	// Folders that do not exist yet and characters a naive DSN would misread.
	path := filepath.Join(t.TempDir(), "var dir", "a?b#c", "audit.db")
	f := fixtureOn(t, path, task.Options{Now: fixedClock()})
	e := env("acme", "s-1")
	a := f.mustTask(t, "task-create", e, `{"subject":"first","description":"kept"}`)
	b := f.mustTask(t, "task-create", e, `{"subject":"second","blocked_by":["`+a.ID+`"]}`)
	f.mustTask(t, "task-update", e, `{"task_id":"`+a.ID+`","status":"completed"}`)
	if err := f.store.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	g := fixtureOn(t, path, task.Options{Now: fixedClock()})
	l := g.mustList(t, e, `{}`)
	if len(l.Tasks) != 2 || l.Tasks[0].ID != a.ID || l.Tasks[1].ID != b.ID {
		t.Fatalf("after reopening: %+v", l)
	}
	if l.Tasks[0].Status != "completed" || *l.Tasks[0].Description != "kept" || l.Tasks[1].BlockedBy[0] != a.ID {
		t.Fatalf("after reopening the tasks differ: %+v", l.Tasks)
	}
	// The reopened store keeps enforcing versions from where they were.
	g.mustTask(t, "task-update", e, `{"task_id":"`+a.ID+`","status":"pending"}`)
}

// Two stores on one file stand for two gateway replicas: the limit holds
// across them because the check and the insert share one write lock.
func TestConcurrentCreatesNeverExceedTheLimitAcrossReplicas(t *testing.T) {
	const max, workers = 10, 40
	path := filepath.Join(t.TempDir(), "audit.db")
	replicas := []*fixture{
		fixtureOn(t, path, task.Options{MaxTasks: max}),
		fixtureOn(t, path, task.Options{MaxTasks: max}),
	}
	e := env("acme", "s-1")
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for i := range workers {
		wg.Go(func() {
			_, errs[i] = replicas[i%2].call(t, "task-create", e, `{"subject":"parallel"}`)
		})
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		if err == nil {
			ok++
			continue
		}
		var me *tools.ModelError
		if !errors.As(err, &me) || me.Message != "limit_exceeded: a session may hold at most 10 tasks" {
			t.Errorf("create %d: %v, want success or limit_exceeded", i, err)
		}
	}
	n, err := replicas[0].store.Count(context.Background(), "acme", "s-1")
	if ok != max || n != max || err != nil {
		t.Fatalf("%d creates succeeded, %d stored (%v); want exactly %d", ok, n, err, max)
	}
}
