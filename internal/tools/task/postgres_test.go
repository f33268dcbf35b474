package task_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/pgtest"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/tools/task"
)

func openPostgres(t testing.TB, dsn string) handle { return openDB(t, store.Postgres, dsn) }

// Two stores with their own pools stand for two gateway replicas: the
// limit holds across them because both take the session's advisory lock.
func TestPostgresConcurrentCreatesNeverExceedTheLimitAcrossReplicas(t *testing.T) {
	const max, workers = 10, 40
	dsn := pgtest.DSN(t)
	replicas := []handle{openPostgres(t, dsn), openPostgres(t, dsn)}
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for i := range workers {
		wg.Go(func() {
			tk := task.Task{ID: "task_" + strings.Repeat("a", 11) + string(rune('a'+i%26)) + string(rune('a'+i/26)),
				Subject: "parallel", Status: task.StatusPending, Owner: "alice"}
			_, errs[i] = replicas[i%2].Create(context.Background(), "acme", "s-1", tk, max)
		})
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, task.ErrLimit):
			t.Errorf("create %d: %v, want success or ErrLimit", i, err)
		}
	}
	for _, r := range replicas {
		n, err := r.Count(t.Context(), "acme", "s-1")
		if ok != max || n != max || err != nil {
			t.Fatalf("%d creates succeeded, %d stored (%v); want exactly %d", ok, n, err, max)
		}
	}
}

func TestPostgresTasksSurviveReopeningTheStore(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.DSN(t)
	s := openPostgres(t, dsn)
	a, err := s.Create(ctx, "acme", "s-1", task.Task{ID: "task_aaaaaaaaaaaa", Subject: "first", Status: task.StatusPending, Owner: "alice"}, 10)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Create(ctx, "acme", "s-1", task.Task{ID: "task_bbbbbbbbbbbb", Subject: "second", Status: task.StatusPending,
		BlockedBy: []string{a.ID}, Owner: "alice"}, 10)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	s = openPostgres(t, dsn)
	got, err := s.List(ctx, "acme", "s-1")
	if err != nil || len(got) != 2 || got[0].ID != a.ID || got[1].ID != b.ID || got[1].BlockedBy[0] != a.ID {
		t.Fatalf("List after reopening = %+v, %v", got, err)
	}
	// The reopened store keeps enforcing versions from where they were.
	next := got[0]
	next.Status = task.StatusCompleted
	if _, err := s.Update(ctx, "acme", "s-1", next); err != nil {
		t.Fatalf("Update after reopening: %v", err)
	}
	if _, err := s.Update(ctx, "acme", "s-1", next); !errors.Is(err, task.ErrConflict) {
		t.Fatalf("second Update at the same version = %v, want ErrConflict", err)
	}
}

// PostgreSQL text cannot hold NUL; a key with one matches nothing, as on
// SQLite, instead of failing as if the store were down.
func TestPostgresKeysWithNULFindNothing(t *testing.T) {
	ctx := t.Context()
	s := openPostgres(t, pgtest.DSN(t))
	tk, err := s.Create(ctx, "acme", "s-1", task.Task{ID: "task_aaaaaaaaaaaa", Subject: "x", Status: task.StatusPending, Owner: "alice"}, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct{ tenant, session, id string }{
		{"acme\x00", "s-1", tk.ID}, {"acme", "s-1\x00", tk.ID}, {"acme", "s-1", tk.ID + "\x00"},
	} {
		if _, err := s.Get(ctx, k.tenant, k.session, k.id); !errors.Is(err, task.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want ErrNotFound", k, err)
		}
		change := tk
		change.ID = k.id
		if _, err := s.Update(ctx, k.tenant, k.session, change); !errors.Is(err, task.ErrNotFound) {
			t.Errorf("Update(%q) = %v, want ErrNotFound", k, err)
		}
		want := 0
		if k.tenant == "acme" && k.session == "s-1" {
			want = 1
		}
		if n, err := s.Count(ctx, k.tenant, k.session); err != nil || n != want {
			t.Errorf("Count(%q, %q) = %d, %v; want %d", k.tenant, k.session, n, err, want)
		}
	}
	if l, err := s.List(ctx, "acme", "s-1\x00"); err != nil || l == nil || len(l) != 0 {
		t.Errorf("List(session with NUL) = %#v, %v; want an empty slice", l, err)
	}
	if _, err := s.Create(ctx, "acme", "s-1", task.Task{ID: "task_bbbbbbbbbbbb", Subject: "y", Status: task.StatusPending,
		BlockedBy: []string{"task_\x00"}, Owner: "alice"}, 10); !errors.Is(err, task.ErrDependency) {
		t.Errorf("Create blocked by an id with NUL = %v, want ErrDependency", err)
	}
	if n, err := s.Count(ctx, "acme", "s-1"); err != nil || n != 1 {
		t.Fatalf("Count = %d, %v; want 1", n, err)
	}
}
