// Package storetest is the conformance suite every audit.Store passes
// (SQLite now, PostgreSQL later). It drives the store through a real
// audit.Log, the way the gateway uses it, and checks what the contract
// promises: durable group commit, exact queries and paging, tenant
// isolation, tamper detection, and no half-written batches.
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

	"github.com/toolgate/toolgate/internal/audit"
)

// Tamperer lets the suite play the attacker with write access to the
// database. Stores implement it in their own test files only (an
// export_test.go), so production builds carry no tampering methods.
type Tamperer interface {
	// TamperRaw overwrites the stored raw JSON of event id.
	TamperRaw(ctx context.Context, id string, raw []byte) error
	// TamperColumn overwrites an indexed column of event id. Columns are
	// named as in the SQL schema: tenant, chain, seq, id, time_ms, tool,
	// principal, outcome, phase, session_id, call_id, decision_id, hash.
	TamperColumn(ctx context.Context, id, column string, value any) error
	// TamperDelete removes event id.
	TamperDelete(ctx context.Context, id string) error
}

// Run runs the suite. open must return a fresh, empty store for each call
// that also implements Tamperer and RetentionTamperer; Run closes it when
// the subtest ends.
func Run(t *testing.T, open func(t *testing.T) audit.Store) {
	tests := []struct {
		name string
		fn   func(*testing.T, func(*testing.T) audit.Store)
	}{
		{"append fills the chain and get returns the committed event", testAppendGet},
		{"concurrent appends are group committed without gaps or duplicates", testConcurrent},
		{"invalid events are refused and leave the chain intact", testInvalidEvents},
		{"heads name the last link of every tenant", testHeads},
		{"a new log continues the chain from the stored heads", testContinue},
		{"two chains of one tenant verify independently", testTwoChains},
		{"query filters select exactly the matching events", testFilters},
		{"paging walks every event exactly once newest first", testPaging},
		{"bad cursors and filters are rejected", testBadQueries},
		{"masked input is stored masked", testMasking},
		{"verify detects tampering", testTamper},
		{"tenants never see each other's events", testTenantIsolation},
		{"a failed insert writes nothing and the chain continues", testInsertFailure},
		{"a commit with a lost acknowledgement is continued from the store", testLostAck},
		{"ping reports failing commits until a probe or a commit succeeds", testCommitHealth},
		{"a record the store refuses fails its own event and no other", testRefusedRecord},
		{"a full queue refuses appends with ErrOverloaded", testOverloaded},
		{"an append abandoned by its context may still commit", testAbandoned},
		{"close drains queued appends and later appends fail", testClose},
	}
	tests = append(tests, retentionTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open)
		})
	}
}

func testAppendGet(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{})
	evs := f.appendN("acme", 3)
	prev := ""
	for i, ev := range evs {
		if ev.ID == "" || ev.Time == "" || ev.Chain != "main" || ev.Seq != int64(i+1) || ev.PrevHash != prev ||
			!strings.HasPrefix(ev.Hash, audit.HashPrefix) {
			t.Fatalf("event %d after Append: id=%q time=%q chain=%q seq=%d prev=%q hash=%q", i, ev.ID, ev.Time, ev.Chain, ev.Seq, ev.PrevHash, ev.Hash)
		}
		prev = ev.Hash

		got, err := f.log.Get(f.ctx, "acme", ev.ID)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if a, b := canonical(t, got), canonical(t, ev); a != b {
			t.Fatalf("Get returned\n%s\nwant\n%s", a, b)
		}
		raw := f.raw("acme", ev.ID)
		if string(raw) != canonical(t, ev) {
			t.Fatalf("stored raw is not the canonical event:\n%s", raw)
		}
		if h, err := audit.ComputeHash(raw); err != nil || h != ev.Hash {
			t.Fatalf("ComputeHash(raw) = %q, %v; want %q", h, err, ev.Hash)
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
	errs := make(chan error, goroutines*each)
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				if err := f.log.Append(f.ctx, event(tenantOf(g), g*each+i)); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Append: %v", err)
	}

	want := map[string]int{}
	for g := range goroutines {
		want[tenantOf(g)] += each
	}
	seen := map[string]bool{}
	for tenant, n := range want {
		rows := f.rows(tenant)
		if len(rows) != n {
			t.Fatalf("%s: %d rows stored, want %d", tenant, len(rows), n)
		}
		for i, r := range rows {
			if r.Seq != int64(i+1) {
				t.Fatalf("%s: row %d has seq %d: not contiguous", tenant, i, r.Seq)
			}
			if seen[r.ID] {
				t.Fatalf("duplicate event id %s", r.ID)
			}
			seen[r.ID] = true
		}
		f.mustVerify(tenant, n)
	}
	batches := f.metric(audit.MetricBatchSize)
	t.Logf("%d events in %v batches", goroutines*each, batches)
	if batches < 1 || batches > goroutines*each {
		t.Fatalf("batch count %v out of range", batches)
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
	} {
		if err := f.log.Append(f.ctx, ev); !errors.Is(err, audit.ErrInvalidEvent) {
			t.Errorf("%s: Append = %v, want ErrInvalidEvent", name, err)
		}
	}
	ev := event("acme", 1)
	ev.Time = "2024-06-01T10:00:00.123+02:00" // a caller's own time, other zone
	if err := f.log.Append(f.ctx, ev); err != nil || ev.Seq != 2 {
		t.Fatalf("Append after refusals: seq %d, %v; want seq 2", ev.Seq, err)
	}
	f.mustVerify("acme", 2)
}

func testHeads(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{})
	a := f.appendN("acme", 4)
	g := f.appendN("globex", 2)
	heads, err := f.store.Heads(f.ctx, "main")
	if err != nil {
		t.Fatalf("Heads: %v", err)
	}
	want := map[string]audit.Head{"acme": {Seq: 4, Hash: a[3].Hash}, "globex": {Seq: 2, Hash: g[1].Hash}}
	if len(heads) != len(want) || heads["acme"] != want["acme"] || heads["globex"] != want["globex"] {
		t.Fatalf("Heads = %v, want %v", heads, want)
	}
	other, err := f.store.Heads(f.ctx, "replica-2")
	if err != nil || len(other) != 0 {
		t.Fatalf("Heads(other chain) = %v, %v; want empty", other, err)
	}
}

func testContinue(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{})
	f.appendN("acme", 3)
	if err := f.log.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	l2, err := audit.NewLog(f.store, audit.LogOptions{Now: newClock()})
	if err != nil {
		t.Fatalf("NewLog: %v", err)
	}
	defer l2.Close()
	ev := event("acme", 3)
	if err := l2.Append(f.ctx, ev); err != nil || ev.Seq != 4 {
		t.Fatalf("Append on a new log: seq %d, %v; want seq 4", ev.Seq, err)
	}
	f.log = l2
	f.mustVerify("acme", 4)
}

func testTwoChains(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{Chain: "a"})
	b, err := audit.NewLog(f.store, audit.LogOptions{Chain: "b", Now: newClock()})
	if err != nil {
		t.Fatalf("NewLog: %v", err)
	}
	defer b.Close()
	for i := range 6 {
		l := f.log
		if i%2 == 1 {
			l = b
		}
		ev := event("acme", i)
		if err := l.Append(f.ctx, ev); err != nil {
			t.Fatalf("Append: %v", err)
		}
		if ev.Seq != int64(i/2+1) {
			t.Fatalf("event %d on chain %s has seq %d, want %d", i, ev.Chain, ev.Seq, i/2+1)
		}
	}
	f.mustVerify("acme", 6)
	if res, err := b.Verify(f.ctx, "acme"); err != nil || !res.OK || res.EventsChecked != 6 {
		t.Fatalf("Verify from chain b = %+v, %v", res, err)
	}
	rows := f.rows("acme")
	for i, r := range rows {
		wantChain := "a"
		if i >= 3 {
			wantChain = "b"
		}
		if r.Chain != wantChain || r.Seq != int64(i%3+1) {
			t.Fatalf("Scan row %d is (%s, %d): not ordered by chain then seq", i, r.Chain, r.Seq)
		}
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
	// Each case gets a fresh log of 8 acme events (and 2 of globex), tampers
	// as an attacker with database access would, and names the event
	// Verify must report for acme.
	type env struct {
		f   *fixture
		tam Tamperer
		a   []*audit.Event // acme events, a[i].Seq == i+1
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
		{"raw JSON edited and rehashed breaks the next link", func(t *testing.T, e env) string {
			setRaw(t, e, e.a[3].ID, true, func(m map[string]any) { m["principal"] = "mallory" })
			must(t, e.tam.TamperColumn(e.ctx, e.a[3].ID, "principal", "mallory"))
			return e.a[4].ID
		}},
		{"middle event deleted", func(t *testing.T, e env) string {
			must(t, e.tam.TamperDelete(e.ctx, e.a[4].ID))
			return e.a[5].ID
		}},
		{"first event deleted", func(t *testing.T, e env) string {
			must(t, e.tam.TamperDelete(e.ctx, e.a[0].ID))
			return e.a[1].ID
		}},
		{"last event deleted", func(t *testing.T, e env) string {
			must(t, e.tam.TamperDelete(e.ctx, e.a[7].ID))
			return e.a[6].ID // the chain is known to go on after it
		}},
		{"two events swapped", func(t *testing.T, e env) string {
			x, y := e.a[2], e.a[5]
			must(t, e.tam.TamperColumn(e.ctx, x.ID, "seq", -1))
			must(t, e.tam.TamperColumn(e.ctx, y.ID, "seq", x.Seq))
			must(t, e.tam.TamperColumn(e.ctx, x.ID, "seq", y.Seq))
			setRaw(t, e, x.ID, false, func(m map[string]any) { m["seq"] = y.Seq })
			setRaw(t, e, y.ID, false, func(m map[string]any) { m["seq"] = x.Seq })
			return y.ID
		}},
		{"two events swapped and rehashed", func(t *testing.T, e env) string {
			x, y := e.a[2], e.a[5]
			must(t, e.tam.TamperColumn(e.ctx, x.ID, "seq", -1))
			must(t, e.tam.TamperColumn(e.ctx, y.ID, "seq", x.Seq))
			must(t, e.tam.TamperColumn(e.ctx, x.ID, "seq", y.Seq))
			setRaw(t, e, x.ID, true, func(m map[string]any) { m["seq"] = y.Seq })
			setRaw(t, e, y.ID, true, func(m map[string]any) { m["seq"] = x.Seq })
			return y.ID // its prev_hash is not a[1]'s hash
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
			return e.a[4].ID
		}},
		{"event moved to another tenant with its raw JSON", func(t *testing.T, e env) string {
			setRaw(t, e, e.a[3].ID, true, func(m map[string]any) { m["tenant"] = "globex" })
			must(t, e.tam.TamperColumn(e.ctx, e.a[3].ID, "tenant", "globex"))
			if res := e.f.verify("globex"); res.OK || res.FirstBadEvent != e.a[3].ID {
				t.Fatalf("Verify(globex) = %+v, want the moved event %s", res, e.a[3].ID)
			}
			return e.a[4].ID
		}},
		{"event moved to another chain", func(t *testing.T, e env) string {
			must(t, e.tam.TamperColumn(e.ctx, e.a[3].ID, "chain", "zzz"))
			return e.a[4].ID
		}},
	}
	for _, col := range []struct {
		name string
		val  any
	}{
		// Values no test event has, so that every edit is a change.
		{"tool", "bash"}, {"principal", "mallory"}, {"outcome", "tampered"}, {"phase", "tampered"},
		{"session_id", "s-x"}, {"call_id", "call-x"}, {"decision_id", "dec-x"}, {"time_ms", int64(0)},
		{"hash", audit.HashPrefix + strings.Repeat("0", 64)}, {"seq", int64(99)},
	} {
		tests = append(tests, tcase{"indexed column " + col.name + " edited", func(t *testing.T, e env) string {
			must(t, e.tam.TamperColumn(e.ctx, e.a[3].ID, col.name, col.val))
			if col.name == "seq" {
				return e.a[4].ID // the row moved to the end; its old place is a gap
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
			tam, ok := f.store.(Tamperer)
			if !ok {
				t.Fatalf("%T does not implement storetest.Tamperer", f.store)
			}
			e := env{f: f, tam: tam, a: f.appendN("acme", 8), ctx: f.ctx}
			f.appendN("globex", 2)
			f.mustVerify("acme", 8)
			wantBad := tc.tamper(t, e)
			res := f.verify("acme")
			if res.OK || res.FirstBadEvent != wantBad {
				t.Fatalf("Verify after tampering = %+v, want first bad event %s", res, wantBad)
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

	for _, mode := range []struct {
		name      string
		fault     fault
		headsFail bool
	}{
		{"store unreachable", faultBefore, false},
		{"store fails midway through the batch", faultMidway, false},
		{"store and heads reload unreachable", faultBefore, true},
	} {
		fs.set(mode.fault, mode.headsFail)
		for range 2 { // the second attempt also exercises the heads reload
			ev := event("acme", 9)
			err := f.log.Append(f.ctx, ev)
			if !errors.Is(err, audit.ErrUnavailable) {
				t.Fatalf("%s: Append = %v, want ErrUnavailable", mode.name, err)
			}
			if ev.Seq != 0 || ev.Hash != "" {
				t.Fatalf("%s: failed Append filled seq %d hash %q", mode.name, ev.Seq, ev.Hash)
			}
			if _, err := f.log.Get(f.ctx, "acme", ev.ID); !errors.Is(err, audit.ErrNotFound) {
				t.Fatalf("%s: failed event is readable: %v", mode.name, err)
			}
		}
		if n := len(f.rows("acme")); n != 3 {
			t.Fatalf("%s: %d rows stored after failed appends, want 3 (half-written batch)", mode.name, n)
		}
	}
	if got := f.metric(audit.MetricAppends, "result", "error"); got != 6 {
		t.Fatalf("%s{result=error} = %v, want 6", audit.MetricAppends, got)
	}

	fs.set(faultNone, false)
	for i := range 2 {
		ev := event("acme", 10+i)
		if err := f.log.Append(f.ctx, ev); err != nil || ev.Seq != int64(4+i) {
			t.Fatalf("Append after recovery: seq %d, %v; want seq %d", ev.Seq, err, 4+i)
		}
	}
	f.mustVerify("acme", 5)
}

func testLostAck(t *testing.T, open func(*testing.T) audit.Store) {
	var fs *faultyStore
	f := newFixture(t, open, func(s audit.Store) audit.Store {
		fs = &faultyStore{Store: s}
		return fs
	}, audit.LogOptions{})
	f.appendN("acme", 2)
	fs.set(faultAfter, false)
	lost := event("acme", 2)
	if err := f.log.Append(f.ctx, lost); !errors.Is(err, audit.ErrUnavailable) {
		t.Fatalf("Append = %v, want ErrUnavailable", err)
	}
	fs.set(faultNone, false)
	ev := event("acme", 3)
	if err := f.log.Append(f.ctx, ev); err != nil || ev.Seq != 4 {
		t.Fatalf("Append after a lost acknowledgement: seq %d, %v; want 4 (the landed event is seq 3)", ev.Seq, err)
	}
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
	if ev.Seq != 0 {
		t.Fatalf("abandoned Append filled seq %d", ev.Seq)
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
	fs.set(faultBefore, false)
	if err := f.log.Append(f.ctx, event("acme", 1)); !errors.Is(err, audit.ErrUnavailable) {
		t.Fatalf("Append = %v, want ErrUnavailable", err)
	}
	for range 2 {
		if err := f.log.Ping(f.ctx); !errors.Is(err, audit.ErrCommitsFailing) || !errors.Is(err, audit.ErrUnavailable) {
			t.Fatalf("Ping while commits fail = %v, want ErrCommitsFailing", err)
		}
	}

	// The store heals: the probe of the next Ping sees it, with no append.
	fs.set(faultNone, false)
	if err := f.log.Ping(f.ctx); err != nil {
		t.Fatalf("Ping once writes succeed again: %v", err)
	}
	f.appendN("acme", 1)
	f.mustVerify("acme", 2)

	// A failing batch makes Ping fail again; a successful one clears it
	// even when no probe ran in between.
	fs.set(faultBefore, false)
	if err := f.log.Append(f.ctx, event("acme", 3)); !errors.Is(err, audit.ErrUnavailable) {
		t.Fatalf("Append = %v, want ErrUnavailable", err)
	}
	fs.set(faultNone, false)
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
	// other callers' events, before and after it in the chain.
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
	if refusedEv.Seq != 0 || refusedEv.Hash != "" {
		t.Fatalf("refused AppendWith filled seq %d hash %q", refusedEv.Seq, refusedEv.Hash)
	}
	f.mustVerify("acme", others+1)
	if err := f.log.Ping(f.ctx); err != nil {
		t.Fatalf("a refused record is not a failing store: Ping = %v", err)
	}
}
