package store

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgate/toolgate/internal/approval"
	"github.com/toolgate/toolgate/internal/approval/approvaltest"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/audit/storetest"
	"github.com/toolgate/toolgate/internal/pgtest"
	"github.com/toolgate/toolgate/internal/tlog"
)

// backend is one driver under test: how to get a fresh database, and how
// to break its inserts from outside, as a full disk, a read-only file or
// a constraint would.
type backend struct {
	driver string
	dsn    func(t *testing.T) string
	// failInserts makes every insert into table fail until heal.
	failInserts func(t *testing.T, dsn, table string) (heal func())
}

var backends = []backend{
	{
		driver: SQLite,
		dsn:    func(t *testing.T) string { return filepath.Join(t.TempDir(), "audit.db") },
		failInserts: func(t *testing.T, dsn, table string) func() {
			t.Helper()
			// A busy timeout: the log's integrator may hold the write
			// lock for a moment.
			db, err := sql.Open("sqlite", "file:"+dsn+"?_pragma=busy_timeout(10000)")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			if _, err := db.Exec(`CREATE TRIGGER fail_` + table + ` BEFORE INSERT ON ` + table +
				` BEGIN SELECT RAISE(ABORT, 'injected: ` + table + ` insert fails'); END`); err != nil {
				t.Fatal(err)
			}
			return func() {
				if _, err := db.Exec(`DROP TRIGGER fail_` + table); err != nil {
					t.Fatal(err)
				}
			}
		},
	},
	{
		driver: Postgres,
		dsn:    func(t *testing.T) string { return pgtest.DSN(t) },
		failInserts: func(t *testing.T, dsn, table string) func() {
			t.Helper()
			c, err := pgx.Connect(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close(context.Background()) })
			if _, err := c.Exec(t.Context(), `CREATE OR REPLACE FUNCTION fail_insert() RETURNS trigger LANGUAGE plpgsql AS
				$$ BEGIN RAISE EXCEPTION 'injected: % insert fails', TG_TABLE_NAME; END $$;
				CREATE TRIGGER fail_`+table+` BEFORE INSERT ON `+table+` FOR EACH ROW EXECUTE FUNCTION fail_insert()`); err != nil {
				t.Fatal(err)
			}
			return func() {
				if _, err := c.Exec(context.Background(), `DROP TRIGGER fail_`+table+` ON `+table); err != nil {
					t.Fatal(err)
				}
			}
		},
	},
}

func eachBackend(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.driver, func(t *testing.T) { fn(t, b) })
	}
}

func openFor(t *testing.T, b backend, dsn string, opts ...Option) *DB {
	t.Helper()
	db, err := Open(context.Background(), b.driver, dsn, append([]Option{WithMaxConns(4)}, opts...)...)
	if err != nil {
		t.Fatalf("Open(%s): %v", b.driver, err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func heldEvent(a *approval.Approval) *audit.Event {
	return &audit.Event{Tenant: a.Tenant, Principal: a.Principal, CallID: a.CallID, DecisionID: a.DecisionID,
		Tool: a.Tool, Action: a.Action, Phase: audit.PhaseDecision, Outcome: "approval_required",
		Approval: &audit.ApprovalInfo{ID: a.ID}}
}

// A record (an approval, a question) commits in the transaction of the
// event that announces it: both exist, or neither.
func TestRecordsCommitWithTheirEvents(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		dsn := b.dsn(t)
		db := openFor(t, b, dsn)
		lg, err := audit.NewLog(db.Audit(), audit.LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer lg.Close()
		ap := db.Approvals()
		const ttl = 100 * 365 * 24 * time.Hour

		a1 := approvaltest.Pending("a1", "acme", "c1", 0, ttl)
		ev1 := heldEvent(a1)
		if err := lg.AppendWith(ctx, ev1, a1); err != nil {
			t.Fatalf("AppendWith(approval): %v", err)
		}
		if got, err := ap.Get(ctx, "acme", "a1"); err != nil || got.DecisionID != a1.DecisionID {
			t.Fatalf("the approval committed with its event: %+v, %v", got, err)
		}
		q1 := approvaltest.PendingQuestion("q1", "acme", "c2", 0, ttl, "yes", "no")
		if err := lg.AppendWith(ctx, &audit.Event{Tenant: "acme", CallID: "c2", Phase: audit.PhaseResult, Outcome: "awaiting_user",
			Question: &audit.QuestionInfo{ID: "q1"}}, q1); err != nil {
			t.Fatalf("AppendWith(question): %v", err)
		}
		if _, err := ap.Question(ctx, "acme", "q1"); err != nil {
			t.Fatalf("the question committed with its event: %v", err)
		}

		for _, tc := range []struct {
			table string
			rec   any
			ev    *audit.Event
			get   func() error
		}{
			{"approvals", approvaltest.Pending("a2", "acme", "c3", 0, ttl), heldEvent(approvaltest.Pending("a2", "acme", "c3", 0, ttl)),
				func() error { _, err := ap.Get(ctx, "acme", "a2"); return err }},
			{"questions", approvaltest.PendingQuestion("q2", "acme", "c4", 0, ttl),
				&audit.Event{Tenant: "acme", CallID: "c4", Phase: audit.PhaseResult, Question: &audit.QuestionInfo{ID: "q2"}},
				func() error { _, err := ap.Question(ctx, "acme", "q2"); return err }},
		} {
			heal := b.failInserts(t, dsn, tc.table)
			err := lg.AppendWith(ctx, tc.ev, tc.rec)
			var re *audit.RecordError
			if !errors.Is(err, audit.ErrUnavailable) || !errors.As(err, &re) {
				t.Fatalf("%s insert failing: AppendWith = %v, want ErrUnavailable wrapping a *RecordError", tc.table, err)
			}
			if _, err := lg.Get(ctx, "acme", tc.ev.ID); !errors.Is(err, audit.ErrNotFound) {
				t.Fatalf("%s insert failing: its event is stored (%v)", tc.table, err)
			}
			if err := tc.get(); !errors.Is(err, approval.ErrNotFound) {
				t.Fatalf("%s insert failing: the record is stored (%v)", tc.table, err)
			}
			heal()
		}

		// A record of another tenant than its event's is refused.
		other := approvaltest.Pending("a3", "globex", "c5", 0, ttl)
		ev := heldEvent(other)
		ev.Tenant = "acme"
		if err := lg.AppendWith(ctx, ev, other); !errors.Is(err, audit.ErrUnavailable) {
			t.Fatalf("AppendWith(record of another tenant) = %v, want a refusal", err)
		}
		if _, err := ap.Get(ctx, "globex", "a3"); !errors.Is(err, approval.ErrNotFound) {
			t.Fatalf("the refused record is stored: %v", err)
		}

		if res, err := lg.Verify(ctx, "acme"); err != nil || !res.OK || res.EventsChecked != 2 {
			t.Fatalf("Verify = %+v, %v; want the two committed events", res, err)
		}
	})
}

// A read-only store reads what is there and writes nothing.
func TestReadOnlyStoresWriteNothing(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		dsn := b.dsn(t)
		rw := openFor(t, b, dsn)
		lg, err := audit.NewLog(rw.Audit(), audit.LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ev := storetest.BenchEvent("acme", 0)
		if err := lg.Append(ctx, ev); err != nil {
			t.Fatal(err)
		}
		lg.Close()

		ro := openFor(t, b, dsn, ReadOnly())
		if got, err := ro.Audit().Get(ctx, "acme", ev.ID); err != nil || got.Hash != ev.Hash {
			t.Fatalf("read-only Get = %v, %v", got, err)
		}
		if p, err := ro.Audit().Query(ctx, "acme", audit.Filter{}); err != nil || len(p.Events) != 1 {
			t.Fatalf("read-only Query = %d events, %v", len(p.Events), err)
		}
		if err := ro.Audit().Probe(ctx); err == nil {
			t.Fatal("a read-only store committed a probe")
		}
		if err := ro.Approvals().Create(ctx, approvaltest.Pending("a1", "acme", "c1", 0, time.Hour)); err == nil {
			t.Fatal("a read-only store created an approval")
		}
		if _, err := ro.Tasks().Count(ctx, "acme", "s-1"); err != nil {
			t.Fatalf("read-only task count: %v", err)
		}
		ls, err := audit.NewLog(ro.Audit(), audit.LogOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer ls.Close()
		if err := ls.Append(ctx, storetest.BenchEvent("acme", 1)); !errors.Is(err, audit.ErrUnavailable) {
			t.Fatalf("Append on a read-only store = %v, want ErrUnavailable", err)
		}
		if p, err := rw.Audit().Query(ctx, "acme", audit.Filter{}); err != nil || len(p.Events) != 1 {
			t.Fatalf("after the read-only store's attempts: %d events, %v", len(p.Events), err)
		}
	})
}

func TestReadOnlyNeverCreatesAnSQLiteDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "var", "audit.db")
	if _, err := Open(t.Context(), SQLite, path, ReadOnly()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open(ReadOnly) of a missing file = %v, want ErrNotExist", err)
	}
	if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Open(ReadOnly) created the folder: %v", err)
	}
}

// The database file, its -wal and -shm files, and the folders created for
// them are the gateway's alone.
func TestSQLiteFilesAreOwnerOnly(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "var", "db", "audit.db")
	db := openSQLite(t, path)
	lg, err := audit.NewLog(db.Audit(), audit.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	if err := lg.Append(t.Context(), storetest.BenchEvent("acme", 0)); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(root, "var"), filepath.Join(root, "var", "db")} {
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("folder %s: %v, %v; want mode 0700", dir, fi.Mode().Perm(), err)
		}
	}
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v; want mode 0600", f, err)
			if err == nil {
				t.Errorf("%s has mode %v", f, fi.Mode().Perm())
			}
		}
	}
	// Migrate creates the file the same way.
	other := filepath.Join(root, "m", "audit.db")
	if _, err := Migrate(t.Context(), SQLite, other); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(other); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("%s after Migrate: %v, %v; want mode 0600", other, fi.Mode().Perm(), err)
	}
}

// A reopened database continues every tenant's tree where it stood.
func TestReopenContinuesTheTree(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		dsn := b.dsn(t)
		if b.driver == SQLite {
			// A path with characters a naive DSN would misread, in
			// folders that do not exist yet.
			dsn = filepath.Join(t.TempDir(), "var dir", "a?b#c", "audit.db")
		}
		keyFile := filepath.Join(t.TempDir(), "audit-signing.key")
		key, err := tlog.LoadOrCreateSigner(keyFile, tlog.KeyName)
		if err != nil {
			t.Fatal(err)
		}
		db := openFor(t, b, dsn)
		l := newLog(t, db.Audit(), key)
		var first []*audit.Event
		for _, tenant := range []string{"acme", "acme", "globex"} {
			ev := testEvent(tenant, "read-file")
			if err := l.Append(ctx, ev); err != nil {
				t.Fatalf("Append: %v", err)
			}
			first = append(first, ev)
		}
		l.Close()
		if err := db.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if b.driver == SQLite {
			if _, err := os.Stat(dsn); err != nil {
				t.Fatalf("database file: %v", err)
			}
		}

		// The restarted gateway loads the same key file.
		if key, err = tlog.LoadOrCreateSigner(keyFile, tlog.KeyName); err != nil {
			t.Fatal(err)
		}
		l = newLog(t, openFor(t, b, dsn).Audit(), key)
		for _, ev := range first {
			got, err := l.Get(ctx, ev.Tenant, ev.ID)
			if err != nil || got.Hash != ev.Hash {
				t.Fatalf("event %s after reopen: %v (hash %v)", ev.ID, err, got)
			}
		}
		for tenant, want := range map[string]int64{"acme": 2, "globex": 1} {
			ev := testEvent(tenant, "grep")
			if err := l.Append(ctx, ev); err != nil {
				t.Fatal(err)
			}
			if err := l.Sync(ctx, tenant); err != nil {
				t.Fatal(err)
			}
			got, err := l.Get(ctx, tenant, ev.ID)
			if err != nil || got.LogIndex == nil || *got.LogIndex != want {
				t.Fatalf("%s after reopen: log_index %v, %v; want %d", tenant, got.LogIndex, err, want)
			}
			mustVerify(t, l, tenant, int(want)+1)
		}
	})
}

// The schema is versioned: an unmigrated database is refused by a gateway
// that may not migrate, migrating twice applies nothing the second time,
// and a database from a newer gateway is refused, not silently used.
func TestSchemaIsVersioned(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		dsn := b.dsn(t)
		if _, err := Open(ctx, b.driver, dsn, WithoutMigrations()); !errors.Is(err, ErrSchema) ||
			!strings.Contains(err.Error(), "gateway audit migrate") {
			t.Fatalf("Open(WithoutMigrations) before migrating = %v, want a pointer to `gateway audit migrate`", err)
		}
		applied, err := Migrate(ctx, b.driver, dsn)
		if err != nil || len(applied) == 0 || applied[0] != "00001_audit_events.sql" {
			t.Fatalf("Migrate on an empty database = %v, %v", applied, err)
		}
		if again, err := Migrate(ctx, b.driver, dsn); err != nil || len(again) != 0 {
			t.Fatalf("Migrate when current = %v, %v; want nothing applied", again, err)
		}
		db := openFor(t, b, dsn, WithoutMigrations())
		if err := db.Audit().Ping(ctx); err != nil {
			t.Fatalf("Ping: %v", err)
		}
		openFor(t, b, dsn).Close() // migrations already applied: a no-op

		if err := db.Audit().(interface {
			TamperSchemaVersion(context.Context, int) error
		}).TamperSchemaVersion(ctx, 999); err != nil {
			t.Fatal(err)
		}
		db.Close()
		for name, open := range map[string]func() error{
			"Open":                    func() error { _, err := Open(ctx, b.driver, dsn); return err },
			"Open without migrations": func() error { _, err := Open(ctx, b.driver, dsn, WithoutMigrations()); return err },
			"Open read-only":          func() error { _, err := Open(ctx, b.driver, dsn, ReadOnly()); return err },
			"Migrate":                 func() error { _, err := Migrate(ctx, b.driver, dsn); return err },
		} {
			if err := open(); !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "newer") {
				t.Errorf("%s on a newer schema = %v, want a refusal", name, err)
			}
		}
	})
}

// auditStoreOf is the shared part of db's audit repository.
func auditStoreOf(db *DB) *auditStore {
	switch a := db.Audit().(type) {
	case *sqliteAudit:
		return &a.auditStore
	case *pgAudit:
		return &a.auditStore
	}
	panic("an audit repository of no known driver")
}

// Migrators starting together (replicas, or `gateway audit migrate` beside
// a gateway) take turns: every migration is applied and recorded once.
func TestMigratorsStartingTogetherMigrateOnce(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		const migrators = 6
		dsn := b.dsn(t)
		errs := make([]error, migrators)
		applied := make([][]string, migrators)
		var wg sync.WaitGroup
		for i := range migrators {
			wg.Go(func() {
				if i%2 == 0 {
					applied[i], errs[i] = Migrate(context.Background(), b.driver, dsn)
					return
				}
				db, err := Open(context.Background(), b.driver, dsn, WithMaxConns(1))
				if err == nil {
					db.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("migrator %d: %v", i, err)
			}
		}
		var rows, versions int
		if err := auditStoreOf(openFor(t, b, dsn)).r.QueryRow(`SELECT count(*), count(DISTINCT version_id) FROM `+versionTable+
			` WHERE version_id > 0`).Scan(&rows, &versions); err != nil {
			t.Fatal(err)
		}
		// Migrate reports what it applied: at most one of them did.
		total := 0
		for _, a := range applied {
			total += len(a)
		}
		want := len(knownVersions(t, b.driver))
		if rows != versions || versions != want || total > versions {
			t.Fatalf("%d version rows for %d versions, %d applied by Migrate; want each of the %d once", rows, versions, total, want)
		}
	})
}
