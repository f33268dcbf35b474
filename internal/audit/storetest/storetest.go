// Package storetest is the conformance suite every audit.Store passes
// (SQLite and PostgreSQL). It drives the store through a real audit.Log,
// the way the gateway uses it, and checks what the contract promises:
// durable group commit, integration of every event into its tenant's
// Merkle tree exactly once, exact queries and paging, tenant isolation,
// signed checkpoints and proofs, tamper detection (also against a saved
// checkpoint), retention, and no half-written batches.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/tlog"
)

// Tamperer lets the suite play the attacker with write access to the
// database (but not the checkpoint signing key). Stores implement it in
// their own test files only (an export_test.go), so production builds
// carry no tampering methods.
type Tamperer interface {
	// TamperRaw overwrites the stored raw JSON of integrated event id.
	TamperRaw(ctx context.Context, id string, raw []byte) error
	// TamperColumn overwrites an indexed column of integrated event id.
	// Columns are named as in the SQL schema: tenant, log_index, chain,
	// seq, id, time_ms, tool, principal, outcome, phase, session_id,
	// call_id, decision_id, hash.
	TamperColumn(ctx context.Context, id, column string, value any) error
	// TamperDelete removes integrated event id.
	TamperDelete(ctx context.Context, id string) error
	// TamperTree replaces the tenant's stored tree: its size, state and
	// root, and all its nodes (the stored checkpoint stays).
	TamperTree(ctx context.Context, tenant string, size int64, state, root []byte, nodes []tlog.Node) error
	// TamperCheckpointNote replaces the tenant's stored latest checkpoint
	// (nil deletes it).
	TamperCheckpointNote(ctx context.Context, tenant string, note []byte, size int64) error
	// TamperDeleteTenant deletes the tenant's events, tree and nodes.
	TamperDeleteTenant(ctx context.Context, tenant string) error
	// InsertLegacy stores an event of the hash-chain era the way the
	// previous gateway did: in the events table, without a log index.
	InsertLegacy(ctx context.Context, ev *audit.Event, raw []byte) error
	// SetPruneBatch bounds the events one prune step deletes.
	SetPruneBatch(n int)
}

// Run runs the suite. open must return a fresh, empty store for each call
// that also implements Tamperer; Run closes it when the subtest ends.
func Run(t *testing.T, open func(t *testing.T) audit.Store) {
	tests := []struct {
		name string
		fn   func(*testing.T, func(*testing.T) audit.Store)
	}{
		{"append fills the hash and get returns the committed event", testAppendGet},
		{"concurrent appends are integrated once each without gaps", testConcurrent},
		{"invalid events are refused and leave the log intact", testInvalidEvents},
		{"a committed event is found by id, call and decision at once, by other filters once integrated", testReadThrough},
		{"a new log continues the tree", testContinue},
		{"two logs on one store build one tree and agree on its checkpoints", testTwoLogs},
		{"query filters select exactly the matching events", testFilters},
		{"paging walks every event exactly once newest first", testPaging},
		{"bad cursors and filters are rejected", testBadQueries},
		{"masked input is stored masked", testMasking},
		{"verify detects tampering", testTamper},
		{"tenants never see each other's events", testTenantIsolation},
		{"a failed insert writes nothing and the log goes on", testInsertFailure},
		{"a commit with a lost acknowledgement is integrated all the same", testLostAck},
		{"ping reports failing commits until a probe or a commit succeeds", testCommitHealth},
		{"a record the store refuses fails its own event and no other", testRefusedRecord},
		{"a full queue refuses appends with ErrOverloaded", testOverloaded},
		{"an append abandoned by its context may still commit", testAbandoned},
		{"close drains queued appends and later appends fail", testClose},
	}
	tests = append(tests, checkpointTests...)
	tests = append(tests, retentionTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open)
		})
	}
}

func tamperer(t *testing.T, s audit.Store) Tamperer {
	t.Helper()
	tam, ok := s.(Tamperer)
	if !ok {
		t.Fatalf("%T does not implement storetest.Tamperer", s)
	}
	return tam
}

func testAppendGet(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{})
	evs := f.appendN("acme", 3)
	for i, ev := range evs {
		if ev.ID == "" || ev.Time == "" || ev.Chain != "" || ev.Seq != 0 || ev.PrevHash != "" || ev.LogIndex != nil ||
			!strings.HasPrefix(ev.Hash, audit.HashPrefix) {
			t.Fatalf("event %d after Append: id=%q time=%q chain=%q seq=%d prev=%q hash=%q log_index=%v",
				i, ev.ID, ev.Time, ev.Chain, ev.Seq, ev.PrevHash, ev.Hash, ev.LogIndex)
		}
		got, err := f.log.Get(f.ctx, "acme", ev.ID)
		if err != nil {
			t.Fatalf("Get right after Append: %v", err)
		}
		got.LogIndex = nil // may be integrated already
		if a, b := canonical(t, got), canonical(t, ev); a != b {
			t.Fatalf("Get returned\n%s\nwant\n%s", a, b)
		}
	}
	f.sync("acme")
	for i, ev := range evs {
		got, err := f.log.Get(f.ctx, "acme", ev.ID)
		if err != nil || got.LogIndex == nil || *got.LogIndex != int64(i) {
			t.Fatalf("Get after Sync: %v, log_index %v; want %d", err, got.LogIndex, i)
		}
		raw := f.raw("acme", ev.ID)
		if string(raw) != canonical(t, ev) {
			t.Fatalf("stored raw is not the canonical event:\n%s", raw)
		}
		if h, err := audit.ComputeHash(raw); err != nil || h != ev.Hash {
			t.Fatalf("ComputeHash(raw) = %q, %v; want %q", h, err, ev.Hash)
		}
		// The API's form, log_index included, hashes the same.
		b, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if h, err := audit.ComputeHash(b); err != nil || h != ev.Hash {
			t.Fatalf("ComputeHash(event with log_index) = %q, %v; want %q", h, err, ev.Hash)
		}
	}
	if _, err := f.log.Get(f.ctx, "acme", "no-such-id"); !errors.Is(err, audit.ErrNotFound) {
		t.Fatalf("Get(unknown) = %v, want ErrNotFound", err)
	}
	if err := f.log.Ping(f.ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if got := f.metric(audit.MetricAppends, "result", "ok"); got != 3 {
		t.Fatalf("%s{result=ok} = %v, want 3", audit.MetricAppends, got)
	}
	f.mustVerify("acme", 3)
}

// mustBeLog checks that the tenant's integrated rows are exactly want (by
// id, in any order), each once, at log indexes 0..n-1.
func (f *fixture) mustBeLog(tenant string, want map[string]bool) {
	f.t.Helper()
	rows := f.rows(tenant)
	if len(rows) != len(want) {
		f.t.Fatalf("%s: %d events integrated, want %d", tenant, len(rows), len(want))
	}
	seen := map[string]bool{}
	for i, r := range rows {
		if r.LogIndex != int64(i) {
			f.t.Fatalf("%s: row %d has log_index %d: not contiguous", tenant, i, r.LogIndex)
		}
		if seen[r.ID] || !want[r.ID] {
			f.t.Fatalf("%s: event %s integrated twice or unknown", tenant, r.ID)
		}
		seen[r.ID] = true
	}
}

func testConcurrent(t *testing.T, open func(*testing.T) audit.Store) {
	const goroutines, each = 64, 50
	f := newFixture(t, open, nil, audit.LogOptions{})
	tenantOf := func(g int) string {
		if g%4 == 0 {
			return "globex"
		}
		return "acme"
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	want := map[string]map[string]bool{"acme": {}, "globex": {}}
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				ev := event(tenantOf(g), g*each+i)
				if err := f.log.Append(f.ctx, ev); err != nil {
					errs <- err
					continue
				}
				mu.Lock()
				want[ev.Tenant][ev.ID] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Append: %v", err)
	}
	for tenant, ids := range want {
		f.sync(tenant)
		f.mustBeLog(tenant, ids)
		f.mustVerify(tenant, len(ids))
	}
	batches := f.metric(audit.MetricBatchSize)
	t.Logf("%d events in %v batches", goroutines*each, batches)
	if batches < 1 || batches > goroutines*each {
		t.Fatalf("batch count %v out of range", batches)
	}
	if got := f.metric(audit.MetricIntegrated); got != goroutines*each {
		t.Fatalf("%s = %v, want %d", audit.MetricIntegrated, got, goroutines*each)
	}
}

func testInvalidEvents(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{})
	f.appendN("acme", 1)
	for name, ev := range map[string]*audit.Event{
		"no tenant":      {Tool: "grep"},
		"bad time":       {Tenant: "acme", Time: "yesterday"},
		"no JSON form":   {Tenant: "acme", Input: map[string]any{"ch": make(chan int)}},
		"invalid UTF-8 ": {Tenant: "acme", Tool: "\xff"},
		"NUL":            {Tenant: "acme", CallID: "a\x00b"},
	} {
		if err := f.log.Append(f.ctx, ev); !errors.Is(err, audit.ErrInvalidEvent) {
			t.Errorf("%s: Append = %v, want ErrInvalidEvent", name, err)
		}
	}
	ev := event("acme", 1)
	ev.Time = "2024-06-01T10:00:00.123+02:00" // a caller's own time, other zone
	if err := f.log.Append(f.ctx, ev); err != nil || ev.Hash == "" {
		t.Fatalf("Append after refusals: hash %q, %v", ev.Hash, err)
	}
	f.mustVerify("acme", 2)
}

func testReadThrough(t *testing.T, open func(*testing.T) audit.Store) {
	// An integrator that does not run on its own: the events stay in the
	// append table until Sync.
	f := newFixture(t, open, nil, audit.LogOptions{IntegrateInterval: time.Hour, IntegrateBatch: 1 << 20})
	evs := f.appendOnly("acme", 4)
	f.appendOnly("globex", 2)
	ev := evs[2]
	got, err := f.log.Get(f.ctx, "acme", ev.ID)
	if err != nil || got.Hash != ev.Hash || got.LogIndex != nil {
		t.Fatalf("Get before integration = %+v, %v", got, err)
	}
	if _, err := f.log.Get(f.ctx, "globex", ev.ID); !errors.Is(err, audit.ErrNotFound) {
		t.Fatalf("Get(globex, acme's pending event) = %v, want ErrNotFound", err)
	}
	for _, flt := range []audit.Filter{{CallID: ev.CallID}, {DecisionID: ev.DecisionID}, {CallID: ev.CallID, Phase: ev.Phase}} {
		p, err := f.log.Query(f.ctx, "acme", flt)
		want := []string{}
		for _, e := range newestFirst(evs) {
			if matches(e, flt) {
				want = append(want, e.ID)
			}
		}
		if err != nil || !slices.Equal(append([]string{}, ids(p.Events)...), want) {
			t.Fatalf("Query(%+v) before integration = %v, %v; want %v", flt, ids(p.Events), err, want)
		}
	}
	if p, err := f.log.Query(f.ctx, "globex", audit.Filter{CallID: ev.CallID}); err != nil || len(p.Events) != 0 {
		t.Fatalf("globex sees acme's pending events: %v, %v", ids(p.Events), err)
	}
	if p, err := f.log.Query(f.ctx, "acme", audit.Filter{Tool: ev.Tool}); err != nil || len(p.Events) != 0 {
		t.Fatalf("Query by tool before integration = %v, %v; want nothing yet", ids(p.Events), err)
	}
	// Paging through a call's events crosses from the events table into
	// the append table.
	f.sync("acme")
	more := event("acme", 4) // call-2, like evs[4..5]: same call as none of evs
	more.CallID = ev.CallID
	if err := f.log.Append(f.ctx, more); err != nil {
		t.Fatal(err)
	}
	var walked []string
	flt := audit.Filter{CallID: ev.CallID, Limit: 1}
	for {
		p, err := f.log.Query(f.ctx, "acme", flt)
		if err != nil {
			t.Fatal(err)
		}
		walked = append(walked, ids(p.Events)...)
		if p.NextCursor == "" {
			break
		}
		flt.Cursor = p.NextCursor
	}
	var want []string
	for _, e := range newestFirst(append(slices.Clone(evs), more)) {
		if e.CallID == ev.CallID {
			want = append(want, e.ID)
		}
	}
	if !slices.Equal(walked, want) {
		t.Fatalf("paging a call across both tables = %v, want %v", walked, want)
	}
	f.sync("acme")
	if p, err := f.log.Query(f.ctx, "acme", audit.Filter{Tool: ev.Tool}); err != nil || len(p.Events) == 0 {
		t.Fatalf("Query by tool after integration = %v, %v", ids(p.Events), err)
	}
	f.mustVerify("acme", 5)
	f.mustVerify("globex", 2)
}

func testContinue(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{})
	f.appendN("acme", 3)
	// Close integrates what it can; the next log takes over the rest.
	if err := f.log.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	l2 := f.newLog(audit.LogOptions{})
	ev := event("acme", 3)
	if err := l2.Append(f.ctx, ev); err != nil {
		t.Fatalf("Append on a new log: %v", err)
	}
	f.log = l2
	f.sync("acme")
	got, err := l2.Get(f.ctx, "acme", ev.ID)
	if err != nil || got.LogIndex == nil || *got.LogIndex != 3 {
		t.Fatalf("the new log's event: %v, log_index %v; want 3", err, got.LogIndex)
	}
	f.mustVerify("acme", 4)
}

func testTwoLogs(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{})
	b := f.newLog(audit.LogOptions{})
	want := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			l := f.log
			if g%2 == 1 {
				l = b
			}
			for i := range 25 {
				ev := event("acme", g*25+i)
				if err := l.Append(f.ctx, ev); err != nil {
					t.Errorf("Append: %v", err)
					return
				}
				mu.Lock()
				want[ev.ID] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := b.Sync(f.ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	f.sync("acme")
	f.mustBeLog("acme", want)
	// The latest checkpoint covers everything once it is due again; both
	// logs serve the same bytes.
	f.waitFor("a checkpoint of the whole log", func() bool {
		_ = f.log.Sync(f.ctx, "acme")
		_, cp := f.checkpoint("acme")
		return cp.Size == uint64(len(want))
	})
	na, err := f.log.Checkpoint(f.ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	nb, err := b.Checkpoint(f.ctx, "acme")
	if err != nil || string(na) != string(nb) {
		t.Fatalf("the two logs serve different checkpoints:\n%s\n%s (%v)", na, nb, err)
	}
	f.mustVerify("acme", len(want))
	if res, err := b.Verify(f.ctx, "acme"); err != nil || !res.OK || res.EventsChecked != len(want) {
		t.Fatalf("Verify from the other log = %+v, %v", res, err)
	}
}

// seedQuery appends n events of tenant whose times come in pairs sharing a
// millisecond, so that ordering ties are broken by id.
func seedQuery(f *fixture, tenant string, n int) []*audit.Event {
	f.t.Helper()
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	out := make([]*audit.Event, n)
	for i := range n {
		ev := event(tenant, i)
		ev.Time = audit.FormatTime(base.Add(time.Duration(i/2) * time.Millisecond))
		if err := f.log.Append(f.ctx, ev); err != nil {
			f.t.Fatalf("Append: %v", err)
		}
		out[i] = ev
	}
	f.sync(tenant)
	return out
}

func matches(ev *audit.Event, f audit.Filter) bool {
	for _, c := range [][2]string{
		{f.Tool, ev.Tool}, {f.Principal, ev.Principal}, {f.Outcome, ev.Outcome}, {f.Phase, ev.Phase},
		{f.SessionID, ev.SessionID}, {f.CallID, ev.CallID}, {f.DecisionID, ev.DecisionID},
	} {
		if c[0] != "" && c[0] != c[1] {
			return false
		}
	}
	tm, err := time.Parse(time.RFC3339Nano, ev.Time)
	if err != nil {
		panic(err)
	}
	if !f.From.IsZero() && tm.Before(f.From) || !f.To.IsZero() && tm.After(f.To) {
		return false
	}
	return true
}

func testFilters(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{})
	evs := seedQuery(f, "acme", 40)
	seedQuery(f, "globex", 40) // same field values: must never show up
	at := func(i int) time.Time {
		tm, _ := time.Parse(time.RFC3339Nano, evs[i].Time)
		return tm
	}
	tests := []struct {
		name  string
		f     audit.Filter
		empty bool
	}{
		{name: "no filter", f: audit.Filter{}},
		{name: "tool", f: audit.Filter{Tool: "grep"}},
		{name: "principal", f: audit.Filter{Principal: "bob"}},
		{name: "outcome", f: audit.Filter{Outcome: "denied"}},
		{name: "phase", f: audit.Filter{Phase: audit.PhaseResult}},
		{name: "session", f: audit.Filter{SessionID: "s-2"}},
		{name: "call", f: audit.Filter{CallID: "call-7"}},
		{name: "decision", f: audit.Filter{DecisionID: "dec-3"}},
		{name: "from is inclusive", f: audit.Filter{From: at(30)}},
		{name: "to is inclusive", f: audit.Filter{To: at(9)}},
		{name: "from and to", f: audit.Filter{From: at(10), To: at(21)}},
		{name: "sub-millisecond bounds round inward", f: audit.Filter{From: at(10).Add(-time.Microsecond), To: at(21).Add(time.Microsecond)}},
		{name: "combined", f: audit.Filter{Tool: "read-file", Principal: "alice", From: at(6)}},
		{name: "phase and outcome", f: audit.Filter{Phase: audit.PhaseDecision, Outcome: "allow", To: at(30)}},
		{name: "matching nothing", f: audit.Filter{Tool: "grep", CallID: "call-0"}, empty: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var want []*audit.Event
			for _, ev := range evs {
				if matches(ev, tc.f) {
					want = append(want, ev)
				}
			}
			if (len(want) == 0) != tc.empty || len(want) == len(evs) && tc.name != "no filter" {
				t.Fatalf("test data: %d of %d events match; the case would prove nothing", len(want), len(evs))
			}
			flt := tc.f
			flt.Limit = audit.MaxLimit
			p, err := f.log.Query(f.ctx, "acme", flt)
			if err != nil {
				t.Fatalf("Query: %v", err)
			}
			if got, exp := ids(p.Events), ids(newestFirst(want)); !slices.Equal(got, exp) {
				t.Fatalf("Query(%s) = %v\nwant %v", tc.name, got, exp)
			}
			if p.NextCursor != "" {
				t.Fatalf("one page holds all, but NextCursor = %q", p.NextCursor)
			}
		})
	}
}

func testPaging(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{})
	evs := seedQuery(f, "acme", 53)
	seedQuery(f, "globex", 10)
	want := ids(newestFirst(evs))
	for _, limit := range []int{1, 7, 52, 53, 100} {
		t.Run(fmt.Sprint("limit ", limit), func(t *testing.T) {
			var got []string
			flt := audit.Filter{Limit: limit}
			for pages := 1; ; pages++ {
				p, err := f.log.Query(f.ctx, "acme", flt)
				if err != nil {
					t.Fatalf("Query: %v", err)
				}
				if len(p.Events) > limit || (p.NextCursor != "" && len(p.Events) != limit) {
					t.Fatalf("page %d holds %d events with limit %d", pages, len(p.Events), limit)
				}
				got = append(got, ids(p.Events)...)
				if p.NextCursor == "" {
					if wantPages := (len(want) + limit - 1) / limit; pages != wantPages {
						t.Fatalf("%d pages, want %d", pages, wantPages)
					}
					break
				}
				flt.Cursor = p.NextCursor
			}
			if !slices.Equal(got, want) {
				t.Fatalf("paging returned %v\nwant %v", got, want)
			}
		})
	}
	t.Run("with a filter", func(t *testing.T) {
		flt := audit.Filter{Tool: "write-file", Limit: 4}
		var want []*audit.Event
		for _, ev := range evs {
			if matches(ev, flt) {
				want = append(want, ev)
			}
		}
		if got := ids(f.all("acme", flt)); !slices.Equal(got, ids(newestFirst(want))) {
			t.Fatalf("filtered paging = %v\nwant %v", got, ids(newestFirst(want)))
		}
	})
	t.Run("default limit", func(t *testing.T) {
		more := seedQuery(f, "initech", audit.DefaultLimit+1)
		p, err := f.log.Query(f.ctx, "initech", audit.Filter{})
		if err != nil || len(p.Events) != audit.DefaultLimit || p.NextCursor == "" {
			t.Fatalf("Query without limit: %d events, cursor %q, %v; want %d and a cursor", len(p.Events), p.NextCursor, err, audit.DefaultLimit)
		}
		if got := f.all("initech", audit.Filter{}); len(got) != len(more) {
			t.Fatalf("walked %d events, want %d", len(got), len(more))
		}
	})
}

func testBadQueries(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{})
	seedQuery(f, "acme", 5)
	seedQuery(f, "globex", 5)
	first := func(tenant string, flt audit.Filter) string {
		flt.Limit = 2
		p, err := f.log.Query(f.ctx, tenant, flt)
		if err != nil || p.NextCursor == "" {
			t.Fatalf("Query: %v (cursor %q)", err, p.NextCursor)
		}
		return p.NextCursor
	}
	good := first("acme", audit.Filter{})
	now := time.Now()
	tests := []struct {
		name   string
		tenant string
		f      audit.Filter
		want   error
	}{
		{"cursor that is not base64url", "acme", audit.Filter{Cursor: "!!not a cursor!!"}, audit.ErrBadCursor},
		{"cursor of random bytes", "acme", audit.Filter{Cursor: "AAECAwQFBgcICQoLDA0ODxAREhM"}, audit.ErrBadCursor},
		{"truncated cursor", "acme", audit.Filter{Cursor: good[:len(good)/2]}, audit.ErrBadCursor},
		{"cursor with a byte changed", "acme", audit.Filter{Cursor: flip(good)}, audit.ErrBadCursor},
		{"another tenant's cursor", "acme", audit.Filter{Cursor: first("globex", audit.Filter{})}, audit.ErrBadCursor},
		{"cursor used with another filter", "acme", audit.Filter{Tool: "grep", Cursor: good}, audit.ErrBadCursor},
		{"limit above 1000", "acme", audit.Filter{Limit: audit.MaxLimit + 1}, audit.ErrBadFilter},
		{"negative limit", "acme", audit.Filter{Limit: -1}, audit.ErrBadFilter},
		{"from after to", "acme", audit.Filter{From: now, To: now.Add(-time.Second)}, audit.ErrBadFilter},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := f.log.Query(f.ctx, tc.tenant, tc.f); !errors.Is(err, tc.want) {
				t.Fatalf("Query = %v, want %v", err, tc.want)
			}
		})
	}
	// A store called directly validates the same way.
	if _, err := f.store.Query(f.ctx, "acme", audit.Filter{Cursor: "!!"}); !errors.Is(err, audit.ErrBadCursor) {
		t.Fatalf("store Query with a bad cursor = %v, want ErrBadCursor", err)
	}
}

// flip changes one character in the middle of a cursor.
func flip(c string) string {
	b := []byte(c)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

func testMasking(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{})
	doc := map[string]any{
		"args":      map[string]any{"path": "notes.txt", "content": "hunter2"},
		"resources": []any{map[string]any{"type": "file", "path": "secrets/db.env"}},
	}
	ev := event("acme", 0)
	ev.Input = audit.Mask(doc, []string{"/args/content", "/resources/0/path", "/nope"})
	if err := f.log.Append(f.ctx, ev); err != nil {
		t.Fatalf("Append: %v", err)
	}
	f.sync("acme")
	got, err := f.log.Get(f.ctx, "acme", ev.ID)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	want := map[string]any{
		"args":      map[string]any{"path": "notes.txt", "content": audit.MaskedValue},
		"resources": []any{map[string]any{"type": "file", "path": audit.MaskedValue}},
	}
	if a, b := canonical(t, got.Input), canonical(t, want); a != b {
		t.Fatalf("stored input %s, want %s", a, b)
	}
	if raw := f.raw("acme", ev.ID); strings.Contains(string(raw), "hunter2") || strings.Contains(string(raw), "db.env") {
		t.Fatalf("masked value reached the store: %s", raw)
	}
	if doc["args"].(map[string]any)["content"] != "hunter2" {
		t.Fatal("Mask modified its input")
	}
	f.mustVerify("acme", 1)
}

func testTamper(t *testing.T, open func(*testing.T) audit.Store) {
	// Each case gets a fresh log of 8 acme events (and 2 of globex), all
	// integrated and under a signed checkpoint, tampers as an attacker
	// with database access would, and names the event Verify must report
	// for acme ("" when the log as a whole no longer hashes to the
	// checkpoint).
	type env struct {
		f   *fixture
		tam Tamperer
		a   []*audit.Event // acme events, a[i] at log_index i
		ctx context.Context
	}
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("tamper: %v", err)
		}
	}
	setRaw := func(t *testing.T, e env, id string, rehash bool, edit func(map[string]any)) {
		t.Helper()
		raw := editRaw(t, e.f.raw("acme", id), rehash, edit)
		must(t, e.tam.TamperRaw(e.ctx, id, raw))
		if rehash {
			h, _ := audit.ComputeHash(raw)
			must(t, e.tam.TamperColumn(e.ctx, id, "hash", h))
		}
	}
	swap := func(t *testing.T, e env, x, y int) {
		must(t, e.tam.TamperColumn(e.ctx, e.a[x].ID, "log_index", -1))
		must(t, e.tam.TamperColumn(e.ctx, e.a[y].ID, "log_index", x))
		must(t, e.tam.TamperColumn(e.ctx, e.a[x].ID, "log_index", y))
	}
	type tcase struct {
		name   string
		tamper func(t *testing.T, e env) (wantBad string)
	}
	tests := []tcase{
		{"raw JSON edited", func(t *testing.T, e env) string {
			setRaw(t, e, e.a[3].ID, false, func(m map[string]any) { m["outcome"] = "allow" })
			return e.a[3].ID
		}},
		{"raw input edited", func(t *testing.T, e env) string {
			setRaw(t, e, e.a[2].ID, false, func(m map[string]any) {
				m["input"].(map[string]any)["args"].(map[string]any)["path"] = "other.md"
			})
			return e.a[2].ID
		}},
		{"raw JSON edited and rehashed no longer matches its leaf", func(t *testing.T, e env) string {
			setRaw(t, e, e.a[3].ID, true, func(m map[string]any) { m["principal"] = "mallory" })
			must(t, e.tam.TamperColumn(e.ctx, e.a[3].ID, "principal", "mallory"))
			return e.a[3].ID
		}},
		{"raw JSON edited and rehashed, tree recomputed", func(t *testing.T, e env) string {
			setRaw(t, e, e.a[3].ID, true, func(m map[string]any) { m["principal"] = "mallory" })
			must(t, e.tam.TamperColumn(e.ctx, e.a[3].ID, "principal", "mallory"))
			e.f.rewriteTree(e.tam, "acme")
			return "" // only the checkpoint this gateway signed can tell
		}},
		{"a log_index written into the raw JSON", func(t *testing.T, e env) string {
			setRaw(t, e, e.a[3].ID, false, func(m map[string]any) { m["log_index"] = 3 })
			return e.a[3].ID
		}},
		{"middle event deleted", func(t *testing.T, e env) string {
			must(t, e.tam.TamperDelete(e.ctx, e.a[4].ID))
			return "(log_index 4)"
		}},
		{"first event deleted", func(t *testing.T, e env) string {
			must(t, e.tam.TamperDelete(e.ctx, e.a[0].ID))
			return "(log_index 0)"
		}},
		{"last event deleted", func(t *testing.T, e env) string {
			must(t, e.tam.TamperDelete(e.ctx, e.a[7].ID))
			return "(log_index 7)"
		}},
		{"last event deleted and the tree shrunk", func(t *testing.T, e env) string {
			must(t, e.tam.TamperDelete(e.ctx, e.a[7].ID))
			e.f.rewriteTree(e.tam, "acme")
			return "(log_index 7)" // this gateway signed a checkpoint of 8
		}},
		{"two events swapped", func(t *testing.T, e env) string {
			swap(t, e, 2, 5)
			return e.a[5].ID // now at log_index 2, where the tree has a[2]
		}},
		{"two events swapped, tree recomputed", func(t *testing.T, e env) string {
			swap(t, e, 2, 5)
			e.f.rewriteTree(e.tam, "acme")
			return ""
		}},
		{"raw JSON of two rows exchanged", func(t *testing.T, e env) string {
			x, y := e.f.raw("acme", e.a[2].ID), e.f.raw("acme", e.a[5].ID)
			must(t, e.tam.TamperRaw(e.ctx, e.a[2].ID, y))
			must(t, e.tam.TamperRaw(e.ctx, e.a[5].ID, x))
			return e.a[2].ID
		}},
		{"event moved to another tenant", func(t *testing.T, e env) string {
			must(t, e.tam.TamperColumn(e.ctx, e.a[3].ID, "tenant", "globex"))
			if res := e.f.verify("globex"); res.OK || res.FirstBadEvent != e.a[3].ID {
				t.Fatalf("Verify(globex) = %+v, want the moved event %s", res, e.a[3].ID)
			}
			return "(log_index 3)"
		}},
		{"event moved to another tenant with its raw JSON", func(t *testing.T, e env) string {
			setRaw(t, e, e.a[3].ID, true, func(m map[string]any) { m["tenant"] = "globex" })
			must(t, e.tam.TamperColumn(e.ctx, e.a[3].ID, "tenant", "globex"))
			if res := e.f.verify("globex"); res.OK || res.FirstBadEvent != e.a[3].ID {
				t.Fatalf("Verify(globex) = %+v, want the moved event %s", res, e.a[3].ID)
			}
			return "(log_index 3)"
		}},
		{"an event given a chain link", func(t *testing.T, e env) string {
			setRaw(t, e, e.a[3].ID, true, func(m map[string]any) { m["prev_hash"] = e.a[2].Hash })
			return e.a[3].ID
		}},
	}
	for _, col := range []struct {
		name string
		val  any
	}{
		// Values no test event has, so that every edit is a change.
		{"tool", "bash"}, {"principal", "mallory"}, {"outcome", "tampered"}, {"phase", "tampered"},
		{"session_id", "s-x"}, {"call_id", "call-x"}, {"decision_id", "dec-x"}, {"time_ms", int64(0)},
		{"hash", audit.HashPrefix + strings.Repeat("0", 64)}, {"seq", int64(99)}, {"chain", "zzz"},
		{"log_index", int64(99)},
	} {
		tests = append(tests, tcase{"indexed column " + col.name + " edited", func(t *testing.T, e env) string {
			must(t, e.tam.TamperColumn(e.ctx, e.a[3].ID, col.name, col.val))
			if col.name == "log_index" {
				return "(log_index 3)" // the row left its place
			}
			return e.a[3].ID
		}})
	}
	tests = append(tests, tcase{"indexed column id edited", func(t *testing.T, e env) string {
		must(t, e.tam.TamperColumn(e.ctx, e.a[3].ID, "id", "forged-id"))
		return "forged-id"
	}})

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, open, nil, audit.LogOptions{})
			e := env{f: f, tam: tamperer(t, f.store), a: f.appendN("acme", 8), ctx: f.ctx}
			f.appendN("globex", 2)
			f.mustVerify("acme", 8)
			if _, cp := f.checkpoint("acme"); cp.Size != 8 {
				t.Fatalf("checkpoint of size %d, want 8", cp.Size)
			}
			wantBad := tc.tamper(t, e)
			res := f.verify("acme")
			if res.OK || res.FirstBadEvent != wantBad || res.Problem == "" {
				t.Fatalf("Verify after tampering = %+v, want first bad event %q", res, wantBad)
			}
			if len(f.rows("globex")) == 2 { // not a case that moved an event there
				f.mustVerify("globex", 2)
			}
			if got := f.metric(audit.MetricVerify); got < 1 {
				t.Fatalf("%s = %v, want >= 1", audit.MetricVerify, got)
			}
		})
	}
}

func testTenantIsolation(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{})
	a := f.appendN("acme", 5)
	f.appendN("globex", 3)
	for _, ev := range f.all("globex", audit.Filter{Limit: 2}) {
		if ev.Tenant != "globex" {
			t.Fatalf("globex query returned an event of %s", ev.Tenant)
		}
	}
	// acme-only values: a session and a decision globex does not have.
	if got := f.all("globex", audit.Filter{DecisionID: a[4].DecisionID}); len(got) != 0 {
		t.Fatalf("globex sees %d events filtered on an acme-only decision id", len(got))
	}
	for _, ev := range a {
		if _, err := f.log.Get(f.ctx, "globex", ev.ID); !errors.Is(err, audit.ErrNotFound) {
			t.Fatalf("Get(globex, acme's %s) = %v, want ErrNotFound", ev.ID, err)
		}
	}
	f.mustVerify("globex", 3)
	f.mustVerify("acme", 5)
	f.mustVerify("nobody", 0)
}

func testInsertFailure(t *testing.T, open func(*testing.T) audit.Store) {
	var fs *faultyStore
	f := newFixture(t, open, func(s audit.Store) audit.Store {
		fs = &faultyStore{Store: s}
		return fs
	}, audit.LogOptions{})
	f.appendN("acme", 3)

	fs.set(faultBefore)
	for range 2 {
		ev := event("acme", 9)
		err := f.log.Append(f.ctx, ev)
		if !errors.Is(err, audit.ErrUnavailable) {
			t.Fatalf("Append = %v, want ErrUnavailable", err)
		}
		if ev.Hash != "" {
			t.Fatalf("failed Append filled hash %q", ev.Hash)
		}
		if _, err := f.log.Get(f.ctx, "acme", ev.ID); !errors.Is(err, audit.ErrNotFound) {
			t.Fatalf("failed event is readable: %v", err)
		}
	}
	if got := f.metric(audit.MetricAppends, "result", "error"); got != 2 {
		t.Fatalf("%s{result=error} = %v, want 2", audit.MetricAppends, got)
	}
	fs.set(faultNone)
	f.appendN("acme", 2)
	f.mustVerify("acme", 5)
}

func testLostAck(t *testing.T, open func(*testing.T) audit.Store) {
	var fs *faultyStore
	f := newFixture(t, open, func(s audit.Store) audit.Store {
		fs = &faultyStore{Store: s}
		return fs
	}, audit.LogOptions{})
	f.appendN("acme", 2)
	fs.set(faultAfter)
	lost := event("acme", 2)
	if err := f.log.Append(f.ctx, lost); !errors.Is(err, audit.ErrUnavailable) {
		t.Fatalf("Append = %v, want ErrUnavailable", err)
	}
	fs.set(faultNone)
	f.appendN("acme", 1)
	if _, err := f.log.Get(f.ctx, "acme", lost.ID); err != nil {
		t.Fatalf("the event whose acknowledgement was lost: %v", err)
	}
	f.mustVerify("acme", 4)
}

func testOverloaded(t *testing.T, open func(*testing.T) audit.Store) {
	const queue, callers = 2, 10
	var gs *gatedStore
	f := newFixture(t, open, func(s audit.Store) audit.Store {
		gs = newGatedStore(s)
		return gs
	}, audit.LogOptions{QueueSize: queue})
	t.Cleanup(gs.open)

	results := make(chan error, callers+1)
	go func() { results <- f.log.Append(f.ctx, event("acme", 0)) }()
	<-gs.entered // the writer holds event 0 in Insert; the queue is empty

	for i := range callers {
		go func() { results <- f.log.Append(f.ctx, event("acme", i+1)) }()
	}
	// While the writer is held, exactly `queue` callers fit; the others
	// are refused at once.
	for range callers - queue {
		if err := <-results; !errors.Is(err, audit.ErrOverloaded) {
			t.Fatalf("Append with a full queue = %v, want ErrOverloaded", err)
		}
	}
	if got := f.metric(audit.MetricQueueDepth); got != queue {
		t.Fatalf("%s = %v, want %d", audit.MetricQueueDepth, got, queue)
	}
	gs.open()
	for range queue + 1 {
		if err := <-results; err != nil {
			t.Fatalf("queued Append = %v, want success", err)
		}
	}
	if got := f.metric(audit.MetricAppends, "result", "overloaded"); got != callers-queue {
		t.Fatalf("%s{result=overloaded} = %v, want %d", audit.MetricAppends, got, callers-queue)
	}
	f.mustVerify("acme", queue+1)
}

func testAbandoned(t *testing.T, open func(*testing.T) audit.Store) {
	var gs *gatedStore
	f := newFixture(t, open, func(s audit.Store) audit.Store {
		gs = newGatedStore(s)
		return gs
	}, audit.LogOptions{})
	t.Cleanup(gs.open)
	ctx, cancel := context.WithCancel(f.ctx)
	ev := event("acme", 0)
	done := make(chan error, 1)
	go func() { done <- f.log.Append(ctx, ev) }()
	<-gs.entered
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Append with a canceled context = %v, want context.Canceled", err)
	}
	if ev.Hash != "" {
		t.Fatalf("abandoned Append filled hash %q", ev.Hash)
	}
	gs.open()
	if err := f.log.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := f.log.Get(f.ctx, "acme", ev.ID); err != nil {
		t.Fatalf("the abandoned event was not committed: %v", err)
	}
	f.mustVerify("acme", 1)
}

func testClose(t *testing.T, open func(*testing.T) audit.Store) {
	const queued = 5
	var gs *gatedStore
	f := newFixture(t, open, func(s audit.Store) audit.Store {
		gs = newGatedStore(s)
		return gs
	}, audit.LogOptions{})
	t.Cleanup(gs.open)
	results := make(chan error, queued+1)
	go func() { results <- f.log.Append(f.ctx, event("acme", 0)) }()
	<-gs.entered
	for i := range queued {
		go func() { results <- f.log.Append(f.ctx, event("acme", i+1)) }()
	}
	f.waitFor("the queue to fill", func() bool { return f.metric(audit.MetricQueueDepth) == queued })

	closed := make(chan struct{})
	go func() {
		f.log.Close()
		close(closed)
	}()
	gs.open()
	<-closed
	for range queued + 1 {
		if err := <-results; err != nil {
			t.Fatalf("Append queued before Close = %v, want success", err)
		}
	}
	if err := f.log.Append(f.ctx, event("acme", 100)); !errors.Is(err, audit.ErrClosed) {
		t.Fatalf("Append after Close = %v, want ErrClosed", err)
	}
	if err := f.log.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	f.mustVerify("acme", queued+1)
}

func testCommitHealth(t *testing.T, open func(*testing.T) audit.Store) {
	var fs *faultyStore
	f := newFixture(t, open, func(s audit.Store) audit.Store {
		fs = &faultyStore{Store: s}
		return fs
	}, audit.LogOptions{})
	f.appendN("acme", 1)
	if err := f.log.Ping(f.ctx); err != nil {
		t.Fatalf("Ping while commits succeed: %v", err)
	}
	if err := fs.Store.Probe(f.ctx); err != nil {
		t.Fatalf("Probe on a healthy store: %v", err)
	}

	// Commits fail while reads still work: a full disk, a read-only file.
	fs.set(faultBefore)
	if err := f.log.Append(f.ctx, event("acme", 1)); !errors.Is(err, audit.ErrUnavailable) {
		t.Fatalf("Append = %v, want ErrUnavailable", err)
	}
	for range 2 {
		if err := f.log.Ping(f.ctx); !errors.Is(err, audit.ErrCommitsFailing) || !errors.Is(err, audit.ErrUnavailable) {
			t.Fatalf("Ping while commits fail = %v, want ErrCommitsFailing", err)
		}
	}

	// The store heals: the probe of the next Ping sees it, with no append.
	fs.set(faultNone)
	if err := f.log.Ping(f.ctx); err != nil {
		t.Fatalf("Ping once writes succeed again: %v", err)
	}
	f.appendN("acme", 1)
	f.mustVerify("acme", 2)

	// A failing batch makes Ping fail again; a successful one clears it
	// even when no probe ran in between.
	fs.set(faultBefore)
	if err := f.log.Append(f.ctx, event("acme", 3)); !errors.Is(err, audit.ErrUnavailable) {
		t.Fatalf("Append = %v, want ErrUnavailable", err)
	}
	fs.set(faultNone)
	f.appendN("acme", 1)
	if err := f.log.Ping(f.ctx); err != nil {
		t.Fatalf("Ping after a successful commit: %v", err)
	}
	f.mustVerify("acme", 3)
}

// unknownRecord is a record no store keeps.
type unknownRecord struct{ Name string }

func testRefusedRecord(t *testing.T, open func(*testing.T) audit.Store) {
	var gs *gatedStore
	f := newFixture(t, open, func(s audit.Store) audit.Store {
		gs = newGatedStore(s)
		return gs
	}, audit.LogOptions{})
	t.Cleanup(gs.open)

	// Hold the writer so that the refused record shares a batch with
	// other callers' events, before and after it.
	first := make(chan error, 1)
	go func() { first <- f.log.Append(f.ctx, event("acme", 0)) }()
	<-gs.entered
	const others = 4
	results := make(chan error, others)
	var refused error
	refusedEv := event("acme", 99)
	done := make(chan struct{})
	for i := range others {
		go func() { results <- f.log.Append(f.ctx, event("acme", i+1)) }()
		if i == 1 {
			go func() {
				refused = f.log.AppendWith(f.ctx, refusedEv, &unknownRecord{"x"})
				close(done)
			}()
		}
	}
	f.waitFor("the queue to fill", func() bool { return f.metric(audit.MetricQueueDepth) == others+1 })
	gs.open()
	if err := <-first; err != nil {
		t.Fatalf("first Append: %v", err)
	}
	for range others {
		if err := <-results; err != nil {
			t.Fatalf("Append batched with a refused record = %v, want success", err)
		}
	}
	<-done
	var re *audit.RecordError
	if !errors.Is(refused, audit.ErrUnavailable) || !errors.As(refused, &re) {
		t.Fatalf("AppendWith(unknown record) = %v, want ErrUnavailable wrapping a *RecordError", refused)
	}
	if _, err := f.log.Get(f.ctx, "acme", refusedEv.ID); !errors.Is(err, audit.ErrNotFound) {
		t.Fatalf("the event of the refused record is stored: %v", err)
	}
	if refusedEv.Hash != "" {
		t.Fatalf("refused AppendWith filled hash %q", refusedEv.Hash)
	}
	f.mustVerify("acme", others+1)
	if err := f.log.Ping(f.ctx); err != nil {
		t.Fatalf("a refused record is not a failing store: Ping = %v", err)
	}
}
