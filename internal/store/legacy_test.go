package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/jackc/pgx/v5"

	"github.com/toolgate/toolgate/internal/approval"
	"github.com/toolgate/toolgate/internal/approval/approvaltest"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/audit/storetest"
	"github.com/toolgate/toolgate/internal/pgtest"
	"github.com/toolgate/toolgate/internal/tools/task"
)

// The previous gateway migrated its audit, approval and task tables each
// on its own, from the files kept in testdata/legacy (copied verbatim from
// that gateway), recording them in a table per store. These tests build
// such databases, with rows in every table, and open them with Open.

// legacyDB is a database as the previous gateway left it, seen through a
// plain connection.
type legacyDB struct {
	driver string
	dsn    string // what Open takes
	exec   func(t *testing.T, q string, args ...any)
	query  func(t *testing.T, q string, args ...any) [][]any
	dollar bool
}

// legacyStores are the previous gateway's stores: their migration files
// (testdata/legacy/<dir>/<driver>) and migrations tables.
var legacyStores = map[string]struct{ dir, sqliteTable, postgresTable string }{
	"audit":    {"audit", "schema_migrations", "audit_schema_migrations"},
	"approval": {"approval", "approval_schema_migrations", "approval_schema_migrations"},
	"task":     {"task", "task_schema_migrations", "task_schema_migrations"},
}

// migrateLegacy applies the first upTo migrations of one of the previous
// gateway's stores the way its runner did: each file in order, recorded
// in the store's own table.
func (l *legacyDB) migrateLegacy(t *testing.T, name string, upTo int) {
	t.Helper()
	s := legacyStores[name]
	table, created := s.sqliteTable, `applied_at TEXT NOT NULL`
	if l.driver == Postgres {
		table, created = s.postgresTable, `applied_at TIMESTAMPTZ NOT NULL DEFAULT now()`
	}
	l.exec(t, `CREATE TABLE IF NOT EXISTS `+table+` (version INTEGER PRIMARY KEY, name TEXT NOT NULL, `+created+`)`)
	dir := filepath.Join("testdata", "legacy", s.dir, l.driver)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for i, e := range entries[:upTo] {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		l.exec(t, string(b))
		if l.driver == Postgres {
			l.exec(t, `INSERT INTO `+table+` (version, name) VALUES ($1, $2)`, i+1, e.Name())
		} else {
			l.exec(t, `INSERT INTO `+table+` (version, name, applied_at) VALUES (?, ?, ?)`, i+1, e.Name(), "2026-01-01T00:00:00Z")
		}
	}
}

// legacyEvent fills in ev's hash chain link (chain "main", seq, prev)
// and hash, as the previous gateway did, and returns its raw JSON.
func legacyEvent(t *testing.T, ev *audit.Event, seq int64, prev string) []byte {
	t.Helper()
	ev.ID = fmt.Sprintf("legacy-%s-%d", ev.Tenant, seq)
	ev.Time = "2026-01-01T00:00:00.000Z"
	ev.Chain, ev.Seq, ev.PrevHash, ev.Hash = "main", seq, prev, ""
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Hash, err = audit.ComputeHash(b); err != nil {
		t.Fatal(err)
	}
	if b, err = json.Marshal(ev); err != nil {
		t.Fatal(err)
	}
	v := jsontext.Value(b)
	if err := v.Canonicalize(); err != nil {
		t.Fatal(err)
	}
	return v
}

// seedLegacy writes what the previous gateway would have: chained audit
// events, and (when their tables exist) an approval, a question and a task.
func (l *legacyDB) seedLegacy(t *testing.T, withApprovals, withQuestions, withTasks bool) []*audit.Event {
	t.Helper()
	var evs []*audit.Event
	heads := map[string]*audit.Event{}
	q := placeholders(`INSERT INTO audit_events
		(tenant, chain, seq, id, time_ms, tool, principal, outcome, phase, session_id, call_id, decision_id, hash, raw)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, l.dollar)
	for i := range 5 {
		ev := storetest.BenchEvent([]string{"acme", "globex"}[i%2], i)
		seq, prev := int64(1), ""
		if h := heads[ev.Tenant]; h != nil {
			seq, prev = h.Seq+1, h.Hash
		}
		rawJSON := legacyEvent(t, ev, seq, prev)
		heads[ev.Tenant] = ev
		evs = append(evs, ev)
		ms, _ := audit.TimeMS(ev)
		var raw any = string(rawJSON) // SQLite kept TEXT, PostgreSQL BYTEA
		if l.dollar {
			raw = rawJSON
		}
		l.exec(t, q, ev.Tenant, ev.Chain, ev.Seq, ev.ID, ms, ev.Tool, ev.Principal, ev.Outcome, ev.Phase,
			ev.SessionID, ev.CallID, ev.DecisionID, ev.Hash, raw)
	}
	// The previous stores ran the same INSERT statements as today's.
	if withApprovals {
		q, args, err := insertApproval(approvaltest.Pending("a-old", "acme", "c-old", 0, 100*365*24*time.Hour), l.dollar)
		if err != nil {
			t.Fatal(err)
		}
		l.exec(t, q, args...)
	}
	if withQuestions {
		q, args, err := insertQuestion(approvaltest.PendingQuestion("q-old", "acme", "c-ask", 0, 100*365*24*time.Hour, "yes", "no"), l.dollar)
		if err != nil {
			t.Fatal(err)
		}
		l.exec(t, q, args...)
	}
	if withTasks {
		blocked := any(`[]`)
		if l.dollar {
			blocked = []string{}
		}
		l.exec(t, placeholders(`INSERT INTO tasks (tenant, session, id, seq, subject, description, status, blocked_by, owner, created_ms, updated_ms, version)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, l.dollar),
			"acme", "s-1", "task_aaaaaaaaaaaa", 1, "kept", "from before", task.StatusPending, blocked, "alice", int64(1e12), int64(1e12), 1)
	}
	return evs
}

// tables lists the tables of the database's schema.
func (l *legacyDB) tables(t *testing.T) []string {
	q := `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`
	if l.driver == Postgres {
		q = `SELECT tablename FROM pg_tables WHERE schemaname = current_schema()`
	}
	var out []string
	for _, r := range l.query(t, q) {
		out = append(out, fmt.Sprint(r[0]))
	}
	slices.Sort(out)
	return out
}

// schema is every table and index definition plus the version rows, to
// tell whether anything changed.
func (l *legacyDB) schema(t *testing.T) string {
	q := `SELECT type || ' ' || name || ' ' || coalesce(sql, '') FROM sqlite_master ORDER BY type, name`
	if l.driver == Postgres {
		q = `SELECT tablename || ' ' || indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY 1`
	}
	var b strings.Builder
	for _, r := range l.query(t, q) {
		fmt.Fprintln(&b, r...)
	}
	for _, tb := range l.tables(t) {
		if strings.HasSuffix(tb, "schema_migrations") || tb == versionTable {
			fmt.Fprintln(&b, tb, l.query(t, `SELECT * FROM `+tb))
		}
	}
	return b.String()
}

func newLegacySQLite(t *testing.T) *legacyDB {
	path := filepath.Join(t.TempDir(), "audit.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	return &legacyDB{
		driver: SQLite, dsn: path,
		exec: func(t *testing.T, q string, args ...any) {
			t.Helper()
			if _, err := db.Exec(q, args...); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		},
		query: func(t *testing.T, q string, args ...any) [][]any { return sqlRows(t, db, q, args...) },
	}
}

func sqlRows(t *testing.T, db *sql.DB, q string, args ...any) [][]any {
	t.Helper()
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			if b, ok := v.([]byte); ok {
				vals[i] = string(b)
			}
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func newLegacyPostgres(t *testing.T) *legacyDB {
	dsn := pgtest.DSN(t)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return &legacyDB{
		driver: Postgres, dsn: dsn, dollar: true,
		exec: func(t *testing.T, q string, args ...any) {
			t.Helper()
			if _, err := conn.Exec(context.Background(), q, args...); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		},
		query: func(t *testing.T, q string, args ...any) [][]any {
			t.Helper()
			rows, err := conn.Query(context.Background(), q, args...)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			defer rows.Close()
			var out [][]any
			for rows.Next() {
				vals, err := rows.Values()
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, vals)
			}
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
			return out
		},
	}
}

func TestSQLiteDatabaseOfThePreviousGatewayUpgrades(t *testing.T) {
	testLegacyUpgrade(t, newLegacySQLite)
}

func TestPostgresDatabaseOfThePreviousGatewayUpgrades(t *testing.T) {
	testLegacyUpgrade(t, newLegacyPostgres)
}

func testLegacyUpgrade(t *testing.T, newLegacy func(*testing.T) *legacyDB) {
	for _, tc := range []struct {
		name                     string
		auditV, approvalV, taskV int // migrations the previous gateway had applied (0: store never opened)
	}{
		{"every store at its last version", 3, 2, 1},
		{"audit before its last index, approvals before questions, no task tools", 2, 1, 0},
		{"only the audit store", 1, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			l := newLegacy(t)
			l.migrateLegacy(t, "audit", tc.auditV)
			if tc.approvalV > 0 {
				l.migrateLegacy(t, "approval", tc.approvalV)
			}
			if tc.taskV > 0 {
				l.migrateLegacy(t, "task", tc.taskV)
			}
			evs := l.seedLegacy(t, tc.approvalV >= 1, tc.approvalV >= 2, tc.taskV >= 1)
			legacyTables := l.tables(t)

			// A reader that may not migrate says what to do, and changes
			// nothing.
			before := l.schema(t)
			for _, opts := range [][]Option{{ReadOnly()}, {WithoutMigrations()}} {
				if _, err := Open(ctx, l.driver, l.dsn, opts...); !errors.Is(err, ErrSchema) ||
					!strings.Contains(err.Error(), "gateway audit migrate") {
					t.Fatalf("Open(%d) of a previous gateway's database = %v, want ErrSchema naming `gateway audit migrate`", len(opts), err)
				}
			}
			if after := l.schema(t); after != before {
				t.Fatalf("a refused open changed the schema:\n%s\nwas\n%s", after, before)
			}

			db, err := Open(ctx, l.driver, l.dsn, WithMaxConns(4))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer db.Close()

			// Every version is recorded once; the old tables and their
			// rows are still there.
			var versions []int64
			for _, r := range l.query(t, `SELECT version_id FROM `+versionTable+` WHERE version_id > 0 ORDER BY version_id`) {
				versions = append(versions, r[0].(int64))
			}
			if want := knownVersions(t, l.driver); !slices.Equal(versions, want) {
				t.Fatalf("versions recorded: %v, want %v", versions, want)
			}
			after := l.tables(t)
			for _, tb := range legacyTables {
				if !slices.Contains(after, tb) {
					t.Fatalf("table %s is gone after the upgrade (tables: %v)", tb, after)
				}
			}
			for _, tb := range []string{"audit_events", "audit_checkpoints", "approvals", "questions", "tasks", "store_probe",
				"audit_append", "audit_trees", "audit_tree_nodes"} {
				if !slices.Contains(after, tb) {
					t.Fatalf("table %s missing after the upgrade (tables: %v)", tb, after)
				}
			}

			// The audit log's events are put into the tree, in chain
			// order, and verify; new events follow them.
			lg, err := audit.NewLog(db.Audit(), audit.LogOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer lg.Close()
			for _, ev := range evs {
				if got, err := lg.Get(ctx, ev.Tenant, ev.ID); err != nil || got.Hash != ev.Hash {
					t.Fatalf("event %s after the upgrade: %v", ev.ID, err)
				}
			}
			for tenant, n := range map[string]int{"acme": 3, "globex": 2} {
				if res, err := lg.Verify(ctx, tenant); err != nil || !res.OK || res.EventsChecked != n || res.TreeSize != int64(n) {
					t.Fatalf("Verify(%s) after the upgrade = %+v, %v; want ok with %d", tenant, res, err, n)
				}
			}
			for i, ev := range []*audit.Event{evs[0], evs[2], evs[4]} {
				if got, err := lg.Get(ctx, "acme", ev.ID); err != nil || got.LogIndex == nil || *got.LogIndex != int64(i) {
					t.Fatalf("acme event %s (seq %d) after integration: %v, log_index %v; want %d", ev.ID, ev.Seq, err, got.LogIndex, i)
				}
			}
			if p, err := lg.Query(ctx, "acme", audit.Filter{Principal: "user-0", Outcome: "allow"}); err != nil || len(p.Events) != 1 {
				t.Fatalf("query by principal and outcome (the index the upgrade may add): %d events, %v", len(p.Events), err)
			}
			next := storetest.BenchEvent("acme", 9)
			if err := lg.Append(ctx, next); err != nil || next.Seq != 0 || next.Chain != "" {
				t.Fatalf("append after the upgrade: chain %q seq %d, %v", next.Chain, next.Seq, err)
			}
			if err := lg.Sync(ctx, "acme"); err != nil {
				t.Fatal(err)
			}
			if got, err := lg.Get(ctx, "acme", next.ID); err != nil || got.LogIndex == nil || *got.LogIndex != 3 {
				t.Fatalf("new event after the upgrade: %v, log_index %v; want 3", err, got.LogIndex)
			}
			if n, err := lg.Checkpoint(ctx, "acme"); err != nil || !strings.HasPrefix(string(n), "toolgate/acme\n3\n") && !strings.HasPrefix(string(n), "toolgate/acme\n4\n") {
				t.Fatalf("checkpoint after the upgrade: %v\n%s", err, n)
			}

			// Approvals, questions and tasks written before are all there
			// and keep working.
			ap := db.Approvals()
			at := approvaltest.Pending("x", "acme", "x", 0, time.Hour).CreatedAt.Add(time.Minute)
			if tc.approvalV >= 1 {
				a, err := ap.Get(ctx, "acme", "a-old")
				if err != nil || a.Document["args"].(map[string]any)["path"] != "release/VERSION" {
					t.Fatalf("approval of the previous gateway: %+v, %v", a, err)
				}
				if _, err := ap.Decide(ctx, "acme", "a-old", approval.Decision{Status: approval.StatusApproved, By: "bob", At: at}); err != nil {
					t.Fatalf("Decide after the upgrade: %v", err)
				}
			}
			if tc.approvalV >= 2 {
				if q, err := ap.Question(ctx, "acme", "q-old"); err != nil || !slices.Equal(q.Options, []string{"yes", "no"}) {
					t.Fatalf("question of the previous gateway: %+v, %v", q, err)
				}
			}
			if err := ap.CreateQuestion(ctx, approvaltest.PendingQuestion("q-new", "acme", "c-new", 0, time.Hour)); err != nil {
				t.Fatalf("a question after the upgrade: %v", err)
			}
			if tc.taskV >= 1 {
				if l, err := db.Tasks().List(ctx, "acme", "s-1"); err != nil || len(l) != 1 || l[0].Description != "from before" {
					t.Fatalf("task of the previous gateway: %+v, %v", l, err)
				}
			}
			if _, err := db.Tasks().Create(ctx, "acme", "s-2", task.Task{ID: "task_bbbbbbbbbbbb", Subject: "new",
				Status: task.StatusPending, Owner: "alice", BlockedBy: []string{}}, 10); err != nil {
				t.Fatalf("a task after the upgrade: %v", err)
			}

			// Opening again migrates nothing.
			db.Close()
			applied, err := Migrate(ctx, l.driver, l.dsn)
			if err != nil || len(applied) != 0 {
				t.Fatalf("Migrate after the upgrade = %v, %v; want nothing applied", applied, err)
			}
		})
	}

	t.Run("a store of a newer previous-style gateway is refused", func(t *testing.T) {
		l := newLegacy(t)
		l.migrateLegacy(t, "audit", 3)
		table := legacyStores["audit"].sqliteTable
		if l.driver == Postgres {
			table = legacyStores["audit"].postgresTable
			l.exec(t, `INSERT INTO `+table+` (version, name) VALUES (4, 'future.sql')`)
		} else {
			l.exec(t, `INSERT INTO `+table+` (version, name, applied_at) VALUES (4, 'future.sql', '')`)
		}
		before := l.schema(t)
		if _, err := Open(t.Context(), l.driver, l.dsn); !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "newer") {
			t.Fatalf("Open = %v, want ErrSchema (newer)", err)
		}
		if after := l.schema(t); after != before {
			t.Fatalf("the refused upgrade changed the schema:\n%s\nwas\n%s", after, before)
		}
	})
}

// knownVersions are the versions of driver's embedded migrations, in
// order (numbers may have gaps while parallel branches each add theirs).
func knownVersions(t testing.TB, driver string) []int64 {
	t.Helper()
	d := sqliteDialect
	if driver == Postgres {
		d = postgresDialect
	}
	srcs, err := d.sources()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, len(srcs))
	for i, s := range srcs {
		out[i] = s.version
	}
	return out
}
