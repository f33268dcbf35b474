package workspace

import (
	"context"
	"errors"
	"testing"
)

func TestWalksAreBounded(t *testing.T) {
	env, dir := testEnv(t)
	writeFiles(t, dir, map[string]string{
		"a": "", "b": "", "c": "", "d/e": "", "d/f/g/h": "",
	})
	collect := func(w *walker) []string {
		t.Helper()
		var got []string
		if err := w.walk(env.Workspace.Root(), ".", func(e walkEntry) error {
			got = append(got, e.ws)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	excl, _ := newExcluder(nil)

	w := &walker{ctx: context.Background(), excl: excl}
	if got := collect(w); len(got) != 5 || w.incomplete {
		t.Errorf("unbounded walk = %v incomplete %v", got, w.incomplete)
	}
	w = &walker{ctx: context.Background(), excl: excl, maxEntries: 3}
	if got := collect(w); len(got) != 3 || !w.incomplete || w.visited != 3 {
		t.Errorf("entry-bounded walk = %v incomplete %v visited %d", got, w.incomplete, w.visited)
	}
	w = &walker{ctx: context.Background(), excl: excl, maxDepth: 2}
	if got := collect(w); len(got) != 4 || !w.incomplete {
		t.Errorf("depth-bounded walk = %v incomplete %v", got, w.incomplete)
	}
}

func TestWalksStopWhenTheContextEnds(t *testing.T) {
	env, dir := testEnv(t)
	writeFiles(t, dir, map[string]string{"a": "", "b": ""})
	excl, _ := newExcluder(nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := &walker{ctx: ctx, excl: excl}
	err := w.walk(env.Workspace.Root(), ".", func(walkEntry) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}

	plan := mustPrepare(t, NewGrep(), env, map[string]any{"pattern": "x"})
	if _, err := NewGrep().Run(ctx, env, plan.Artifact, NewGrep().Spec().Limits); !errors.Is(err, context.Canceled) {
		t.Errorf("grep err = %v, want context.Canceled", err)
	}
}
