package decision

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// waitFor polls cond until it holds or a generous deadline passes. It
// asserts an outcome, not how fast it arrives.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// watching starts Watch on an engine that has loaded dir and stops it when
// the test ends.
func watching(t *testing.T, dir string) *Engine {
	t.Helper()
	e := NewEngine(Options{Dir: dir, Debounce: 20 * time.Millisecond})
	if err := e.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Watch(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch returned %v after its context ended; want nil", err)
		}
	})
	return e
}

func TestWatchPicksUpAnEdit(t *testing.T) {
	dir := newPack(t, nil)
	e := watching(t, dir)
	before := current(t, e)

	writePack(t, dir, map[string]string{"authz.rego": "package toolgate.authz\n\ndecision := {\"allow\": false, \"reasons\": [\"edited\"]}\n"})
	waitFor(t, "the edited revision", func() bool { return current(t, e) != before })

	d, err := current(t, e).Decide(context.Background(), value(t, `{"tool": {"name": "read-file"}}`))
	if err != nil || d.Allow || len(d.Reasons) != 1 || d.Reasons[0] != "edited" {
		t.Errorf("Decide on the new revision = %+v, %v", d, err)
	}
}

func TestWatchPicksUpNewSubfolders(t *testing.T) {
	dir := newPack(t, nil)
	e := watching(t, dir)
	before := current(t, e)

	// A new folder, then a module inside it: both must be seen.
	writePack(t, dir, map[string]string{"extra/more/x.rego": "package toolgate.extra\n\nx := 1\n"})
	waitFor(t, "the revision with extra/more/x.rego", func() bool {
		for _, m := range current(t, e).Modules() {
			if m.Path == "extra/more/x.rego" {
				return true
			}
		}
		return false
	})
	mid := current(t, e)
	if mid == before {
		t.Fatal("no new revision")
	}
	writePack(t, dir, map[string]string{"extra/more/x.rego": "package toolgate.extra\n\nx := 2\n"})
	waitFor(t, "the edit inside the new subfolder", func() bool { return current(t, e) != mid })
}

func TestWatchKeepsServingThroughABrokenEdit(t *testing.T) {
	dir := newPack(t, nil)
	e := watching(t, dir)
	before := current(t, e)

	writePack(t, dir, map[string]string{"authz.rego": "package toolgate.authz\n\ndecision := {"})
	waitFor(t, "the rejected reload", func() bool { return e.Status().LastError != "" })
	if current(t, e) != before {
		t.Error("a broken edit replaced the serving revision")
	}

	writePack(t, dir, map[string]string{"authz.rego": minimalAuthz + "# repaired\n"})
	waitFor(t, "the repaired revision", func() bool { return current(t, e) != before && e.Status().LastError == "" })
}

// Concurrent decisions during many reloads never fail, and each result
// comes from one complete revision: pack A answers "A" and pack B "B", so a
// decision that mixed revisions or saw a half-built one would show.
func TestDecisionsDuringReloads(t *testing.T) {
	pack := func(name string) map[string]string {
		return map[string]string{
			"authz.rego": fmt.Sprintf("package toolgate.authz\n\ndecision := {\"allow\": true, \"reasons\": [data.pack.name, %q]}\n", name),
			"data.json":  fmt.Sprintf(`{"pack": {"name": %q}}`, name),
		}
	}
	dir := newPack(t, pack("A"))
	e := loaded(t, dir, nil)
	ctx := context.Background()
	input := value(t, `{"tool": {"name": "read-file"}}`)

	stop := make(chan struct{})
	var reloads sync.WaitGroup
	reloads.Go(func() {
		defer close(stop)
		for i := range 60 {
			writePack(t, dir, pack([]string{"A", "B"}[i%2]))
			if err := e.Load(ctx); err != nil {
				t.Errorf("reload %d: %v", i, err)
				return
			}
		}
	})

	var deciders sync.WaitGroup
	for range 4 {
		deciders.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					if n > 0 {
						return
					}
				default:
				}
				rev, err := e.Current()
				if err != nil {
					t.Errorf("Current: %v", err)
					return
				}
				ok, err := rev.Available(ctx, input)
				if err != nil || !ok {
					t.Errorf("Available = %v, %v", ok, err)
					return
				}
				d, err := rev.Decide(ctx, input)
				if err != nil {
					t.Errorf("Decide: %v", err)
					return
				}
				if len(d.Reasons) != 2 || d.Reasons[0] != d.Reasons[1] {
					t.Errorf("decision mixes revisions: %v", d.Reasons)
					return
				}
			}
		})
	}
	reloads.Wait()
	deciders.Wait()
}
