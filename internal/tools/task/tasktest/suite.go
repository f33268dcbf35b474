// Package tasktest is the conformance suite every task.Store passes (SQLite
// now, PostgreSQL later). It checks what the task tools rely on: exact
// round trips, creation order, isolation of every (tenant, session), and
// the limit, dependency, cycle and version checks made atomically with the
// write, also under concurrency.
package tasktest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/tools/task"
)

// StoreSuite runs the suite. open must return a fresh, empty store for each
// call; StoreSuite does not close it (register cleanup in open).
func StoreSuite(t *testing.T, open func(t *testing.T) task.Store) {
	tests := []struct {
		name string
		fn   func(*testing.T, task.Store)
	}{
		{"create then get returns the task exactly as stored", testRoundTrip},
		{"get of a missing, foreign-session or foreign-tenant id is ErrNotFound", testIsolationGet},
		{"list is in creation order and holds only the session's tasks", testListOrder},
		{"count counts only the session's tasks", testCount},
		{"create refuses a full session with ErrLimit and stores nothing", testLimit},
		{"concurrent creates never exceed the limit", testConcurrentLimit},
		{"create refuses a taken id in the session but not in another", testExists},
		{"create refuses dependencies outside the session", testCreateDependency},
		{"create refuses a task that blocks itself", testCreateSelf},
		{"update with the current version applies and bumps the version", testUpdate},
		{"update with a stale version is ErrConflict and changes nothing", testUpdateConflict},
		{"update of a foreign or missing id is ErrNotFound and changes nothing", testIsolationUpdate},
		{"update refuses a dependency cycle", testUpdateCycle},
		{"update refuses dependencies outside the session", testUpdateDependency},
		{"concurrent updates of one version: exactly one wins", testConcurrentUpdate},
		{"concurrent updates cannot together close a cycle", testConcurrentCycle},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open(t))
		})
	}
}

var base = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// id returns a valid task id that is unique within a test.
func id(n int) string { return "task_" + idBody(n) }

// idBody spells n in the id alphabet (a-z, 2-7), 12 characters.
func idBody(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	b := make([]byte, 12)
	for i := 11; i >= 0; i-- {
		b[i] = alphabet[n%32]
		n /= 32
	}
	return string(b)
}

// newTask is a pending task created at base + n ms.
func newTask(n int, deps ...string) task.Task {
	at := base.Add(time.Duration(n) * time.Millisecond)
	return task.Task{
		ID: id(n), Subject: fmt.Sprintf("subject %d", n), Description: fmt.Sprintf("description of %d", n),
		Status: task.StatusPending, BlockedBy: append([]string{}, deps...), Owner: "alice", Created: at, Updated: at,
	}
}

func mustCreate(t *testing.T, s task.Store, tenant, session string, tk task.Task) task.Task {
	t.Helper()
	got, err := s.Create(t.Context(), tenant, session, tk, 1000)
	if err != nil {
		t.Fatalf("Create(%s/%s, %s): %v", tenant, session, tk.ID, err)
	}
	return got
}

func mustGet(t *testing.T, s task.Store, tenant, session, id string) task.Task {
	t.Helper()
	got, err := s.Get(t.Context(), tenant, session, id)
	if err != nil {
		t.Fatalf("Get(%s/%s, %s): %v", tenant, session, id, err)
	}
	return got
}

// same compares every field, times to the millisecond.
func same(a, b task.Task) bool {
	return a.ID == b.ID && a.Subject == b.Subject && a.Description == b.Description && a.Status == b.Status &&
		slices.Equal(a.BlockedBy, b.BlockedBy) && a.Owner == b.Owner && a.Version == b.Version &&
		a.Created.UnixMilli() == b.Created.UnixMilli() && a.Updated.UnixMilli() == b.Updated.UnixMilli()
}

func testRoundTrip(t *testing.T, s task.Store) {
	a := mustCreate(t, s, "acme", "s-1", newTask(1))
	in := newTask(2, a.ID)
	in.Subject = "Ünïcödé ✓ \"quotes\" and \\ backslash"
	in.Description = "line one\nline two\t<tab> 😀"
	in.Created = in.Created.Add(123456 * time.Nanosecond) // below the stored precision
	created := mustCreate(t, s, "acme", "s-1", in)
	want := in
	want.Version = 1
	if !same(created, want) {
		t.Fatalf("Create returned %+v, want %+v", created, want)
	}
	got := mustGet(t, s, "acme", "s-1", in.ID)
	if !same(got, want) || !same(got, created) {
		t.Fatalf("Get = %+v, want %+v", got, want)
	}
	if got.Created.Location() != time.UTC || got.Created.Nanosecond()%int(time.Millisecond) != 0 {
		t.Errorf("Created = %v, want UTC to the millisecond", got.Created)
	}
	empty := mustGet(t, s, "acme", "s-1", a.ID)
	if empty.BlockedBy == nil || len(empty.BlockedBy) != 0 {
		t.Errorf("BlockedBy of a task without dependencies = %#v, want an empty slice", empty.BlockedBy)
	}
}

func testIsolationGet(t *testing.T, s task.Store) {
	tk := mustCreate(t, s, "acme", "s-1", newTask(1))
	for _, c := range []struct{ tenant, session, id string }{
		{"acme", "s-1", id(99)},  // missing
		{"acme", "s-2", tk.ID},   // another session
		{"globex", "s-1", tk.ID}, // another tenant, same session name
		{"acme", "", tk.ID},      // no session
		{"", "s-1", tk.ID},       // no tenant
		{"acme", "s-1", "task_"}, // malformed
		{"acmes-1", "", tk.ID},   // tenant and session run together
		{"acme", "s-1 ", tk.ID},  // near-miss session
	} {
		_, err := s.Get(t.Context(), c.tenant, c.session, c.id)
		if !errors.Is(err, task.ErrNotFound) {
			t.Errorf("Get(%q, %q, %q) = %v, want ErrNotFound", c.tenant, c.session, c.id, err)
		}
	}
}

func testListOrder(t *testing.T, s task.Store) {
	var want []string
	for i := range 12 {
		tk := newTask(40 - i) // ids and times fall while creation order rises
		tk.Created, tk.Updated = base, base
		mustCreate(t, s, "acme", "s-1", tk)
		want = append(want, tk.ID)
		mustCreate(t, s, "acme", "s-2", newTask(100+i))
		mustCreate(t, s, "globex", "s-1", newTask(200+i))
	}
	got, err := s.List(t.Context(), "acme", "s-1")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tk := range got {
		ids = append(ids, tk.ID)
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("List = %v, want creation order %v", ids, want)
	}
	none, err := s.List(t.Context(), "acme", "s-3")
	if err != nil || none == nil || len(none) != 0 {
		t.Fatalf("List of an empty session = %#v, %v; want an empty slice", none, err)
	}
}

func testCount(t *testing.T, s task.Store) {
	for i := range 3 {
		mustCreate(t, s, "acme", "s-1", newTask(i))
	}
	mustCreate(t, s, "acme", "s-2", newTask(10))
	mustCreate(t, s, "globex", "s-1", newTask(20))
	for _, c := range []struct {
		tenant, session string
		want            int
	}{{"acme", "s-1", 3}, {"acme", "s-2", 1}, {"globex", "s-1", 1}, {"globex", "s-2", 0}} {
		n, err := s.Count(t.Context(), c.tenant, c.session)
		if err != nil || n != c.want {
			t.Errorf("Count(%s, %s) = %d, %v; want %d", c.tenant, c.session, n, err, c.want)
		}
	}
}

func testLimit(t *testing.T, s task.Store) {
	ctx := t.Context()
	for i := range 3 {
		if _, err := s.Create(ctx, "acme", "s-1", newTask(i), 3); err != nil {
			t.Fatalf("create %d of 3: %v", i, err)
		}
	}
	if _, err := s.Create(ctx, "acme", "s-1", newTask(3), 3); !errors.Is(err, task.ErrLimit) {
		t.Fatalf("fourth create with max 3 = %v, want ErrLimit", err)
	}
	if _, err := s.Get(ctx, "acme", "s-1", id(3)); !errors.Is(err, task.ErrNotFound) {
		t.Fatalf("refused task was stored: %v", err)
	}
	// The limit is per session.
	if _, err := s.Create(ctx, "acme", "s-2", newTask(3), 3); err != nil {
		t.Fatalf("create in another session: %v", err)
	}
	if _, err := s.Create(ctx, "acme", "s-1", newTask(4), 0); err == nil {
		t.Fatal("create with max 0 succeeded; want an error")
	}
}

func testConcurrentLimit(t *testing.T, s task.Store) {
	const max, workers = 10, 32
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for i := range workers {
		wg.Go(func() {
			_, errs[i] = s.Create(context.Background(), "acme", "s-1", newTask(i), max)
		})
	}
	wg.Wait()
	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, task.ErrLimit):
			t.Errorf("create %d: %v, want nil or ErrLimit", i, err)
		}
	}
	n, err := s.Count(t.Context(), "acme", "s-1")
	if ok != max || n != max || err != nil {
		t.Fatalf("%d creates succeeded and %d tasks stored (%v), want exactly %d", ok, n, err, max)
	}
}

func testExists(t *testing.T, s task.Store) {
	first := mustCreate(t, s, "acme", "s-1", newTask(1))
	dup := newTask(1)
	dup.Subject = "other"
	if _, err := s.Create(t.Context(), "acme", "s-1", dup, 100); !errors.Is(err, task.ErrExists) {
		t.Fatalf("create with a taken id = %v, want ErrExists", err)
	}
	if got := mustGet(t, s, "acme", "s-1", first.ID); !same(got, first) {
		t.Fatalf("taken task changed: %+v", got)
	}
	mustCreate(t, s, "acme", "s-2", dup)
	mustCreate(t, s, "globex", "s-1", dup)
}

func testCreateDependency(t *testing.T, s task.Store) {
	own := mustCreate(t, s, "acme", "s-1", newTask(1))
	other := mustCreate(t, s, "acme", "s-2", newTask(2))
	foreign := mustCreate(t, s, "globex", "s-1", newTask(3))
	for _, deps := range [][]string{{other.ID}, {foreign.ID}, {id(77)}, {own.ID, other.ID}} {
		if _, err := s.Create(t.Context(), "acme", "s-1", newTask(10, deps...), 100); !errors.Is(err, task.ErrDependency) {
			t.Errorf("create blocked by %v = %v, want ErrDependency", deps, err)
		}
	}
	if n, _ := s.Count(t.Context(), "acme", "s-1"); n != 1 {
		t.Fatalf("refused creates stored tasks: count %d", n)
	}
	mustCreate(t, s, "acme", "s-1", newTask(11, own.ID))
}

func testCreateSelf(t *testing.T, s task.Store) {
	if _, err := s.Create(t.Context(), "acme", "s-1", newTask(1, id(1)), 100); !errors.Is(err, task.ErrCycle) {
		t.Fatalf("create blocked by itself = %v, want ErrCycle", err)
	}
}

func testUpdate(t *testing.T, s task.Store) {
	dep := mustCreate(t, s, "acme", "s-1", newTask(1))
	cur := mustCreate(t, s, "acme", "s-1", newTask(2))
	next := cur
	next.Subject, next.Description, next.Status = "new subject", "", task.StatusInProgress
	next.BlockedBy = []string{dep.ID}
	next.Updated = base.Add(time.Hour)
	next.Owner, next.Created = "mallory", base.Add(-time.Hour) // immutable: ignored
	got, err := s.Update(t.Context(), "acme", "s-1", next)
	if err != nil {
		t.Fatal(err)
	}
	want := next
	want.Owner, want.Created, want.Version = cur.Owner, cur.Created, 2
	if !same(got, want) {
		t.Fatalf("Update returned %+v, want %+v", got, want)
	}
	if stored := mustGet(t, s, "acme", "s-1", cur.ID); !same(stored, want) {
		t.Fatalf("stored %+v, want %+v", stored, want)
	}
	next = got
	next.BlockedBy = nil
	got, err = s.Update(t.Context(), "acme", "s-1", next)
	if err != nil || got.Version != 3 || len(got.BlockedBy) != 0 {
		t.Fatalf("second update = %+v, %v", got, err)
	}
}

func testUpdateConflict(t *testing.T, s task.Store) {
	cur := mustCreate(t, s, "acme", "s-1", newTask(1))
	first := cur
	first.Subject = "first"
	if _, err := s.Update(t.Context(), "acme", "s-1", first); err != nil {
		t.Fatal(err)
	}
	stale := cur
	stale.Subject = "stale"
	if _, err := s.Update(t.Context(), "acme", "s-1", stale); !errors.Is(err, task.ErrConflict) {
		t.Fatalf("update at version 1 after one update = %v, want ErrConflict", err)
	}
	if got := mustGet(t, s, "acme", "s-1", cur.ID); got.Subject != "first" || got.Version != 2 {
		t.Fatalf("after the refused update: %+v", got)
	}
}

func testIsolationUpdate(t *testing.T, s task.Store) {
	cur := mustCreate(t, s, "acme", "s-1", newTask(1))
	change := cur
	change.Subject = "hijacked"
	for _, c := range []struct{ tenant, session string }{{"acme", "s-2"}, {"globex", "s-1"}, {"acme", ""}} {
		if _, err := s.Update(t.Context(), c.tenant, c.session, change); !errors.Is(err, task.ErrNotFound) {
			t.Errorf("Update from %s/%s = %v, want ErrNotFound", c.tenant, c.session, err)
		}
	}
	missing := newTask(50)
	missing.Version = 1
	if _, err := s.Update(t.Context(), "acme", "s-1", missing); !errors.Is(err, task.ErrNotFound) {
		t.Errorf("Update of a missing id = %v, want ErrNotFound", err)
	}
	if got := mustGet(t, s, "acme", "s-1", cur.ID); !same(got, cur) {
		t.Fatalf("task changed by foreign updates: %+v", got)
	}
}

func testUpdateCycle(t *testing.T, s task.Store) {
	a := mustCreate(t, s, "acme", "s-1", newTask(1))
	b := mustCreate(t, s, "acme", "s-1", newTask(2, a.ID))
	c := mustCreate(t, s, "acme", "s-1", newTask(3, b.ID))
	for _, deps := range [][]string{{c.ID}, {b.ID}, {a.ID}} {
		next := a
		next.BlockedBy = deps
		if _, err := s.Update(t.Context(), "acme", "s-1", next); !errors.Is(err, task.ErrCycle) {
			t.Errorf("a blocked by %v = %v, want ErrCycle", deps, err)
		}
	}
	if got := mustGet(t, s, "acme", "s-1", a.ID); !same(got, a) {
		t.Fatalf("refused update changed the task: %+v", got)
	}
	// A diamond is not a cycle.
	next := c
	next.BlockedBy = []string{b.ID, a.ID}
	if _, err := s.Update(t.Context(), "acme", "s-1", next); err != nil {
		t.Fatalf("c blocked by b and a: %v", err)
	}
}

func testUpdateDependency(t *testing.T, s task.Store) {
	cur := mustCreate(t, s, "acme", "s-1", newTask(1))
	other := mustCreate(t, s, "acme", "s-2", newTask(2))
	foreign := mustCreate(t, s, "globex", "s-1", newTask(3))
	for _, dep := range []string{other.ID, foreign.ID, id(88)} {
		next := cur
		next.BlockedBy = []string{dep}
		if _, err := s.Update(t.Context(), "acme", "s-1", next); !errors.Is(err, task.ErrDependency) {
			t.Errorf("blocked by %s = %v, want ErrDependency", dep, err)
		}
	}
}

func testConcurrentUpdate(t *testing.T, s task.Store) {
	cur := mustCreate(t, s, "acme", "s-1", newTask(1))
	const workers = 16
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for i := range workers {
		wg.Go(func() {
			next := cur
			next.Subject = fmt.Sprintf("writer %d", i)
			_, errs[i] = s.Update(context.Background(), "acme", "s-1", next)
		})
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("writers %d and %d both won", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, task.ErrConflict):
			t.Errorf("writer %d: %v, want nil or ErrConflict", i, err)
		}
	}
	got := mustGet(t, s, "acme", "s-1", cur.ID)
	if won < 0 || got.Version != 2 || got.Subject != fmt.Sprintf("writer %d", won) {
		t.Fatalf("winner %d, stored %+v", won, got)
	}
}

func testConcurrentCycle(t *testing.T, s task.Store) {
	// Pairs of tasks; for each pair two writers each add one direction.
	// Separately both are acyclic; together they would be a cycle.
	const pairs = 8
	var ts [pairs][2]task.Task
	for p := range pairs {
		ts[p][0] = mustCreate(t, s, "acme", "s-1", newTask(2*p))
		ts[p][1] = mustCreate(t, s, "acme", "s-1", newTask(2*p+1))
	}
	var wg sync.WaitGroup
	for p := range pairs {
		for side := range 2 {
			wg.Go(func() {
				next := ts[p][side]
				next.BlockedBy = []string{ts[p][1-side].ID}
				_, err := s.Update(context.Background(), "acme", "s-1", next)
				if err != nil && !errors.Is(err, task.ErrCycle) {
					t.Errorf("pair %d side %d: %v", p, side, err)
				}
			})
		}
	}
	wg.Wait()
	for p := range pairs {
		a := mustGet(t, s, "acme", "s-1", ts[p][0].ID)
		b := mustGet(t, s, "acme", "s-1", ts[p][1].ID)
		if len(a.BlockedBy)+len(b.BlockedBy) != 1 {
			t.Errorf("pair %d: %v and %v; want exactly one edge", p, a.BlockedBy, b.BlockedBy)
		}
	}
}
