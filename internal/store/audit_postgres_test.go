package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/note"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/audit/storetest"
	"github.com/toolgate/toolgate/internal/pgtest"
	"github.com/toolgate/toolgate/internal/tlog"
)

// pgAuditDB is the audit repository of a database a test opened, with
// that database's Close.
type pgAuditDB struct {
	*pgAudit
	db *DB
}

func (s pgAuditDB) Close() error { return s.db.Close() }

// openPostgresDB opens a database on dsn that closes when the test ends.
// Pools stay small: tests of several packages share one server.
func openPostgresDB(t testing.TB, dsn string, opts ...Option) *DB {
	t.Helper()
	db, err := Open(context.Background(), Postgres, dsn, append([]Option{WithMaxConns(4)}, opts...)...)
	if err != nil {
		t.Fatalf("Open(postgres): %v", err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// openPostgres opens a database on dsn and returns its audit repository.
func openPostgres(t testing.TB, dsn string, opts ...Option) pgAuditDB {
	t.Helper()
	db := openPostgresDB(t, dsn, opts...)
	return pgAuditDB{db.Audit().(*pgAudit), db}
}

// newLog starts a Log on s with signer (nil: a key of its own).
func newLog(t testing.TB, s audit.Store, signer *tlog.Signer) *audit.Log {
	t.Helper()
	l, err := audit.NewLog(s, audit.LogOptions{Signer: signer})
	if err != nil {
		t.Fatalf("NewLog: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// testSigner is a checkpoint key held in memory, for logs that must share
// one (replicas).
func testSigner(t testing.TB) *tlog.Signer {
	t.Helper()
	skey, _, err := note.GenerateKey(rand.Reader, tlog.KeyName)
	if err != nil {
		t.Fatal(err)
	}
	s, err := tlog.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// connect opens a plain connection beside the store, as an operator would.
func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func TestPostgresConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) audit.Store {
		return openPostgres(t, pgtest.DSN(t))
	})
}

// stored reads every integrated row of tenant through Scan, in log order.
func stored(t *testing.T, s audit.Store, tenant string) []audit.Row {
	t.Helper()
	var rows []audit.Row
	if err := s.Scan(t.Context(), tenant, 0, math.MaxInt64, func(r audit.Row) error {
		r.Raw = slices.Clone(r.Raw)
		rows = append(rows, r)
		return nil
	}); err != nil {
		t.Fatalf("Scan(%s): %v", tenant, err)
	}
	return rows
}

func mustVerify(t *testing.T, l *audit.Log, tenant string, n int) {
	t.Helper()
	res, err := l.Verify(t.Context(), tenant)
	if err != nil || !res.OK || res.EventsChecked != n {
		t.Fatalf("Verify(%s) = %+v, %v; want ok with %d events", tenant, res, err, n)
	}
}

func TestPostgresReplicasAppendConcurrentlyWithoutLossOrDuplicates(t *testing.T) {
	const perReplica, workers = 600, 12
	dsn := pgtest.DSN(t)
	// Three stores with their own pools: three identical gateway processes
	// on one database, sharing the checkpoint key file.
	key := testSigner(t)
	replicas := []*audit.Log{
		newLog(t, openPostgres(t, dsn), key),
		newLog(t, openPostgres(t, dsn), key),
		newLog(t, openPostgres(t, dsn), key),
	}
	tenants := []string{"acme", "globex"}

	var mu sync.Mutex
	appended := map[string]*audit.Event{} // by id
	var wg sync.WaitGroup
	errs := make(chan error, len(replicas)*perReplica)
	for r, l := range replicas {
		for w := range workers {
			wg.Go(func() {
				for i := w; i < perReplica; i += workers {
					ev := testEvent(tenants[i%2], fmt.Sprintf("tool-%d", r))
					if err := l.Append(context.Background(), ev); err != nil {
						errs <- err
						return
					}
					mu.Lock()
					appended[ev.ID] = ev
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Append: %v", err)
	}

	// A fourth process, an auditor, reads through its own store.
	auditor := openPostgres(t, dsn)
	seen := map[string]bool{}
	for _, tenant := range tenants {
		for _, l := range replicas {
			if err := l.Sync(t.Context(), tenant); err != nil {
				t.Fatal(err)
			}
		}
		rows := stored(t, auditor, tenant)
		for i, r := range rows {
			if r.LogIndex != int64(i) {
				t.Fatalf("%s: row %d has log_index %d: not contiguous", tenant, i, r.LogIndex)
			}
			if seen[r.ID] {
				t.Fatalf("event %s integrated twice", r.ID)
			}
			seen[r.ID] = true
			ev, ok := appended[r.ID]
			if !ok || ev.Hash != r.Hash || ev.Tenant != tenant {
				t.Fatalf("stored row %s#%d (%s) is not an event an Append reported", tenant, r.LogIndex, r.ID)
			}
		}
		if len(rows) != len(replicas)*perReplica/2 {
			t.Fatalf("%s: %d events integrated, want %d", tenant, len(rows), len(replicas)*perReplica/2)
		}
		// Verify from any replica covers every replica's events.
		for _, l := range replicas {
			mustVerify(t, l, tenant, len(rows))
		}
		mustVerify(t, newLog(t, auditor, key), tenant, len(rows))
		// Every replica serves the same checkpoint.
		var notes []string
		for _, l := range replicas {
			n, err := l.Checkpoint(t.Context(), tenant)
			if err != nil {
				t.Fatal(err)
			}
			notes = append(notes, string(n))
		}
		if notes[0] != notes[1] || notes[1] != notes[2] {
			t.Fatalf("%s: replicas serve different checkpoints: %q", tenant, notes)
		}
	}
	if len(seen) != len(appended) {
		t.Fatalf("%d events integrated, %d appended", len(seen), len(appended))
	}
}

// pool_max_conns and the other pool settings of a DSN configure the pool;
// migrating, on connections of its own, does not send them to the server.
func TestPostgresDSNWithPoolSettingsOpensAndMigrates(t *testing.T) {
	dsn := withParam(t, pgtest.DSN(t), "pool_max_conns", "3")
	if _, err := Migrate(t.Context(), Postgres, dsn); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	db, err := Open(t.Context(), Postgres, dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer db.Close()
	if got := db.Audit().(*pgAudit).pool.Config().MaxConns; got != 3 {
		t.Fatalf("pool size %d, want 3 from the DSN", got)
	}
}

func TestPostgresDSNErrorsDoNotEchoTheDSN(t *testing.T) {
	for _, dsn := range []string{"postgres://u:hunter2@[::1", "host=127.0.0.1 password=hunter2 port=notaport"} {
		_, err := Open(t.Context(), Postgres, dsn)
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(bad dsn) = %v; want an error without the password", err)
		}
		_, err = Migrate(t.Context(), Postgres, dsn)
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Migrate(bad dsn) = %v; want an error without the password", err)
		}
	}
}

// planIndexes maps a Filter field to the index its page query must use.
var planIndexes = []struct {
	field, index string
	set          func(*audit.Filter)
}{
	{"", "audit_events_time", func(*audit.Filter) {}},
	{"tool", "audit_events_tool", func(f *audit.Filter) { f.Tool = "grep" }},
	{"principal", "audit_events_principal", func(f *audit.Filter) { f.Principal = "user-7" }},
	{"outcome", "audit_events_outcome", func(f *audit.Filter) { f.Outcome = "denied" }},
	{"phase", "audit_events_phase", func(f *audit.Filter) { f.Phase = audit.PhaseResult }},
	{"session_id", "audit_events_session_id", func(f *audit.Filter) { f.SessionID = "s-7" }},
	{"call_id", "audit_events_call_id", func(f *audit.Filter) { f.CallID = "call-000000042" }},
	{"decision_id", "audit_events_decision_id", func(f *audit.Filter) { f.DecisionID = "dec-000000042" }},
}

var rowCompareInIndexCond = regexp.MustCompile(`Index Cond: .*ROW\(time_ms, id\) <`)

func TestPostgresQueriesUseAnIndexWithoutSorting(t *testing.T) {
	const events = 6000
	dsn := pgtest.DSN(t)
	s := openPostgres(t, dsn)
	base := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	var n int64
	var mu sync.Mutex
	l, err := audit.NewLog(s, audit.LogOptions{MaxBatch: 1024, Now: func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		n++
		return base.Add(time.Duration(n) * time.Millisecond)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	storetest.Seed(t, l, events)
	if err := s.Analyze(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, pi := range planIndexes {
		t.Run("filter "+pi.field, func(t *testing.T) {
			var f audit.Filter
			pi.set(&f)
			f.Limit = 10
			if p, err := l.Query(t.Context(), "acme", f); err != nil || len(p.Events) == 0 {
				t.Fatalf("Query: %d events, %v; the case would prove nothing", len(p.Events), err)
			}
			next := f
			next.Cursor = audit.EncodeCursor("acme", f, audit.Position{TimeMS: base.Add(time.Second).UnixMilli(), ID: "m"})
			for _, q := range []audit.Filter{f, next} {
				plan, err := s.ExplainQuery(t.Context(), "acme", q)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(plan, "Index Scan using "+pi.index+" ") {
					t.Fatalf("plan does not scan %s:\n%s", pi.index, plan)
				}
				if strings.Contains(plan, "Sort") {
					t.Fatalf("plan sorts:\n%s", plan)
				}
				if q.Cursor != "" && !rowCompareInIndexCond.MatchString(plan) {
					t.Fatalf("the cursor position is not an index condition:\n%s", plan)
				}
			}
		})
	}
}

// withParam adds a connection parameter to a URL or keyword/value DSN.
func withParam(t *testing.T, dsn, key, value string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
		return u.String()
	}
	return dsn + " " + key + "=" + value
}

// killer terminates a store's server connections from a connection of its
// own, the way an operator (or a failover) would, and waits until they are
// gone.
type killer struct {
	t    *testing.T
	conn *pgx.Conn
	app  string // application_name of the victim's connections
}

func newKiller(t *testing.T, dsn string) (*killer, string) {
	var b [6]byte
	rand.Read(b[:])
	k := &killer{t: t, conn: connect(t, dsn), app: "tg-victim-" + hex.EncodeToString(b[:])}
	return k, withParam(t, dsn, "application_name", k.app)
}

func (k *killer) kill(ctx context.Context) (int, error) {
	var n int
	err := k.conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000))
		FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()`, k.app).Scan(&n)
	return n, err
}

func (k *killer) mustKill() int {
	k.t.Helper()
	n, err := k.kill(k.t.Context())
	if err != nil {
		k.t.Fatalf("pg_terminate_backend: %v", err)
	}
	return n
}

func TestPostgresFailsClosedAndRecoversWhenConnectionsAreKilled(t *testing.T) {
	ctx := t.Context()
	k, dsn := newKiller(t, pgtest.DSN(t))
	s := openPostgres(t, dsn)
	l := newLog(t, s, nil)
	committed := 0
	appendOK := func() {
		t.Helper()
		if err := l.Append(ctx, testEvent("acme", "grep")); err != nil {
			t.Fatalf("Append: %v", err)
		}
		committed++
	}
	appendOK()

	t.Run("append on a killed connection fails with ErrUnavailable and stores nothing", func(t *testing.T) {
		// The pool pings a connection that sat idle for a second before
		// handing it out, and replaces it when dead; so use the connection
		// right before the kill, and retry in the unlikely case the gap was
		// that long anyway.
		for range 20 {
			appendOK()
			if k.mustKill() == 0 {
				t.Fatal("the store holds no server connection to kill")
			}
			ev := testEvent("acme", "grep")
			err := l.Append(ctx, ev)
			if err == nil {
				committed++
				continue
			}
			if !errors.Is(err, audit.ErrUnavailable) {
				t.Fatalf("Append after the kill = %v, want ErrUnavailable", err)
			}
			if _, err := l.Get(ctx, "acme", ev.ID); !errors.Is(err, audit.ErrNotFound) {
				t.Fatalf("the refused event is stored: %v", err)
			}
			return
		}
		t.Fatal("no append ever met a killed connection")
	})
	t.Run("the next append reconnects and the log goes on", func(t *testing.T) {
		appendOK()
		mustVerify(t, l, "acme", committed)
	})
	t.Run("readiness follows the connection", func(t *testing.T) {
		for range 20 {
			if err := l.Ping(ctx); err != nil {
				t.Fatalf("Ping before the kill: %v", err)
			}
			k.mustKill()
			if err := l.Ping(ctx); err != nil {
				if !errors.Is(err, audit.ErrUnavailable) {
					t.Fatalf("Ping after the kill = %v, want ErrUnavailable", err)
				}
				if err := l.Ping(ctx); err != nil {
					t.Fatalf("Ping after reconnecting: %v", err)
				}
				return
			}
		}
		t.Fatal("no ping ever met a killed connection")
	})

	t.Run("under repeated kills every reported append is stored and the log verifies", func(t *testing.T) {
		const workers, each = 8, 40
		stop := make(chan struct{})
		killerDone := make(chan error, 1)
		go func() {
			for {
				select {
				case <-stop:
					killerDone <- nil
					return
				default:
				}
				if _, err := k.kill(ctx); err != nil {
					killerDone <- err
					return
				}
			}
		}()
		var mu sync.Mutex
		var ok []*audit.Event
		failed := 0
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range each {
					ev := testEvent("acme", "read-file")
					err := l.Append(ctx, ev)
					mu.Lock()
					if err == nil {
						ok = append(ok, ev)
					} else if errors.Is(err, audit.ErrUnavailable) {
						failed++
					} else {
						t.Errorf("Append under kills = %v, want success or ErrUnavailable", err)
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		close(stop)
		if err := <-killerDone; err != nil {
			t.Fatalf("killer: %v", err)
		}
		t.Logf("under kills: %d appends committed, %d refused", len(ok), failed)

		// Connections killed last may still sit in the pool (the writer's,
		// the integrator's): each fails once more, then the pool replaces it.
		for range 8 {
			s.pool.Ping(ctx)
		}
		for attempt := 0; ; attempt++ {
			err := l.Append(ctx, testEvent("acme", "grep"))
			if err == nil {
				committed++
				break
			}
			if !errors.Is(err, audit.ErrUnavailable) || attempt == 8 {
				t.Fatalf("Append after the kills: %v", err)
			}
			failed++
		}
		var err error
		for attempt := 0; attempt < 8; attempt++ {
			if err = l.Sync(ctx, "acme"); err == nil {
				break
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		rows := stored(t, s, "acme")
		byID := map[string]audit.Row{}
		for _, r := range rows {
			byID[r.ID] = r
		}
		for _, ev := range ok {
			if r, found := byID[ev.ID]; !found || r.Hash != ev.Hash {
				t.Fatalf("event %s was reported committed but is not stored as reported", ev.ID)
			}
		}
		// A refused batch may still have committed when the kill hit
		// between commit and acknowledgement; never more than that.
		before := committed - 1 // appendOK above counted the last one
		if extra := len(rows) - before - 1 - len(ok); extra < 0 || extra > failed {
			t.Fatalf("%d rows stored; %d committed before, %d during (+%d refused), 1 after", len(rows), before, len(ok), failed)
		}
		mustVerify(t, l, "acme", len(rows))
	})
}

// PostgreSQL text cannot hold NUL; a lookup with one matches nothing, as it
// would on SQLite, instead of failing as if the store were down.
func TestPostgresLookupsWithNULFindNothing(t *testing.T) {
	ctx := t.Context()
	s := openPostgres(t, pgtest.DSN(t))
	l := newLog(t, s, nil)
	if err := l.Append(ctx, testEvent("acme", "grep")); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Get(ctx, "acme", "id\x00"); !errors.Is(err, audit.ErrNotFound) {
		t.Errorf("Get(id with NUL) = %v, want ErrNotFound", err)
	}
	if _, err := l.Get(ctx, "acme\x00", "x"); !errors.Is(err, audit.ErrNotFound) {
		t.Errorf("Get(tenant with NUL) = %v, want ErrNotFound", err)
	}
	for _, f := range []audit.Filter{{Tool: "grep\x00"}, {SessionID: "\x00"}, {DecisionID: "d-1\x00"}} {
		if p, err := l.Query(ctx, "acme", f); err != nil || len(p.Events) != 0 {
			t.Errorf("Query(%+v) = %d events, %v; want none", f, len(p.Events), err)
		}
	}
	forged := audit.EncodeCursor("acme", audit.Filter{}, audit.Position{TimeMS: 1, ID: "a\x00"})
	if _, err := l.Query(ctx, "acme", audit.Filter{Cursor: forged}); !errors.Is(err, audit.ErrBadCursor) {
		t.Errorf("Query with a cursor naming a NUL id = %v, want ErrBadCursor", err)
	}
	if res, err := l.Verify(ctx, "acme\x00"); err != nil || !res.OK || res.EventsChecked != 0 {
		t.Errorf("Verify(tenant with NUL) = %+v, %v; want ok with no events", res, err)
	}
	mustVerify(t, l, "acme", 1)
}
