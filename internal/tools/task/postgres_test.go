package task_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/pgtest"
	"github.com/toolgate/toolgate/internal/tools/task"
	"github.com/toolgate/toolgate/internal/tools/task/tasktest"
)

func openPostgres(t testing.TB, dsn string) *task.PostgresStore {
	t.Helper()
	s, err := task.OpenPostgres(context.Background(), dsn)
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestPostgresStoreConformance(t *testing.T) {
	tasktest.StoreSuite(t, func(t *testing.T) task.Store {
		return openPostgres(t, pgtest.DSN(t))
	})
}

// Two stores with their own pools stand for two gateway replicas: the
// limit holds across them because both take the session's advisory lock.
func TestPostgresConcurrentCreatesNeverExceedTheLimitAcrossReplicas(t *testing.T) {
	const max, workers = 10, 40
	dsn := pgtest.DSN(t)
	replicas := []*task.PostgresStore{openPostgres(t, dsn), openPostgres(t, dsn)}
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

func TestPostgresTaskSchemaIsVersioned(t *testing.T) {
	ctx := t.Context()
	dsn := pgtest.DSN(t)
	applied, err := task.MigratePostgres(ctx, dsn)
	if err != nil || len(applied) == 0 || applied[0] != "0001_tasks.sql" {
		t.Fatalf("MigratePostgres on an empty schema = %v, %v", applied, err)
	}
	if again, err := task.MigratePostgres(ctx, dsn); err != nil || len(again) != 0 {
		t.Fatalf("MigratePostgres when current = %v, %v; want nothing applied", again, err)
	}
	openPostgres(t, dsn).Close() // already current: a no-op

	c, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, `INSERT INTO task_schema_migrations (version, name) VALUES (999, 'future')`); err != nil {
		t.Fatal(err)
	}
	if _, err := task.OpenPostgres(ctx, dsn); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("OpenPostgres on a newer schema = %v, want a refusal", err)
	}
	if _, err := task.MigratePostgres(ctx, dsn); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("MigratePostgres on a newer schema = %v, want a refusal", err)
	}
}

func TestPostgresReplicasStartingTogetherMigrateTheTasksOnce(t *testing.T) {
	const replicas = 6
	dsn := pgtest.DSN(t)
	var wg sync.WaitGroup
	errs := make([]error, replicas)
	for i := range replicas {
		wg.Go(func() {
			s, err := task.OpenPostgres(context.Background(), dsn)
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
}

func TestPostgresTheStoreSharesTheAuditDatabase(t *testing.T) {
	ctx := t.Context()
	for _, taskFirst := range []bool{true, false} {
		dsn := pgtest.DSN(t)
		var ts *task.PostgresStore
		if taskFirst {
			ts = openPostgres(t, dsn)
		}
		as, err := audit.OpenPostgres(ctx, dsn)
		if err != nil {
			t.Fatalf("audit.OpenPostgres (task tables first: %v): %v", taskFirst, err)
		}
		t.Cleanup(func() { as.Close() })
		if !taskFirst {
			ts = openPostgres(t, dsn)
		}
		log, err := audit.NewLog(as, audit.LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ev := &audit.Event{Tenant: "acme", Principal: "alice", Tool: "task-create", Action: "task.create",
			Phase: audit.PhaseDecision, Outcome: "allow", SessionID: "s-1", CallID: "c-1", DecisionID: "d-1"}
		if err := log.Append(ctx, ev); err != nil {
			t.Fatalf("audit append beside the task tables: %v", err)
		}
		if _, err := ts.Create(ctx, "acme", "s-1", task.Task{ID: "task_aaaaaaaaaaaa", Subject: "x", Status: task.StatusPending, Owner: "alice"}, 10); err != nil {
			t.Fatalf("task create beside the audit tables: %v", err)
		}
		if res, err := log.Verify(ctx, "acme"); err != nil || !res.OK {
			t.Fatalf("audit verify: %+v, %v", res, err)
		}
		log.Close()
		if err := as.Ping(ctx); err != nil {
			t.Fatalf("audit ping: %v", err)
		}
		if err := ts.Ping(ctx); err != nil {
			t.Fatalf("task ping: %v", err)
		}
	}
}

func TestPostgresDSNErrorsDoNotEchoTheDSN(t *testing.T) {
	for _, dsn := range []string{"postgres://u:hunter2@[::1", "host=127.0.0.1 password=hunter2 port=notaport"} {
		if _, err := task.OpenPostgres(t.Context(), dsn); err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("OpenPostgres(bad dsn) = %v; want an error without the password", err)
		}
		if _, err := task.MigratePostgres(t.Context(), dsn); err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("MigratePostgres(bad dsn) = %v; want an error without the password", err)
		}
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
