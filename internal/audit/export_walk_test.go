package audit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// memQuerier answers Query like a Store (newest first, inclusive
// millisecond bounds, keyset cursors) over events in memory, and records
// what the export asked.
type memQuerier struct {
	events  []*Event
	queries int
	failAt  int    // the failAt-th query fails (0: never)
	after   func() // runs after each query is answered
}

var errMemDown = errors.New("memquerier: down")

func (m *memQuerier) Query(_ context.Context, tenant string, f Filter) (Page, error) {
	m.queries++
	if m.after != nil {
		defer m.after()
	}
	if m.failAt != 0 && m.queries == m.failAt {
		return Page{}, errMemDown
	}
	f, err := f.Normalize()
	if err != nil {
		return Page{}, err
	}
	pos, hasPos, err := DecodeCursor(tenant, f)
	if err != nil {
		return Page{}, err
	}
	from, hasFrom := f.FromMS()
	to, hasTo := f.ToMS()
	var match []*Event
	for _, ev := range m.events {
		ms := mustMS(ev)
		if ev.Tenant != tenant || (f.Phase != "" && ev.Phase != f.Phase) ||
			(hasFrom && ms < from) || (hasTo && ms > to) ||
			(hasPos && cmpPos(Position{ms, ev.ID}, pos) >= 0) {
			continue
		}
		match = append(match, ev)
	}
	slices.SortFunc(match, func(a, b *Event) int { return -cmpEvents(a, b) })
	var page Page
	if len(match) > f.Limit {
		last := match[f.Limit-1]
		page.NextCursor = EncodeCursor(tenant, f, Position{mustMS(last), last.ID})
		match = match[:f.Limit]
	}
	page.Events = match
	return page, nil
}

func mustMS(ev *Event) int64 {
	ms, err := TimeMS(ev)
	if err != nil {
		panic(err)
	}
	return ms
}

func cmpPos(a, b Position) int {
	return cmp.Or(cmp.Compare(a.TimeMS, b.TimeMS), cmp.Compare(a.ID, b.ID))
}

// cmpEvents orders events oldest first, as Export does.
func cmpEvents(a, b *Event) int {
	return cmpPos(Position{mustMS(a), a.ID}, Position{mustMS(b), b.ID})
}

var exportEpoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func walkEvent(tenant string, n int, at time.Time) *Event {
	phase := PhaseDecision
	if n%3 == 2 {
		phase = PhaseResult
	}
	return &Event{ID: fmt.Sprintf("ev-%06d", n), Tenant: tenant, Time: FormatTime(at), Phase: phase}
}

// exportFixture mixes what a real log holds: a steady trickle, bursts,
// milliseconds crowded beyond a page, gaps of days, and another tenant.
func exportFixture() []*Event {
	r := rand.New(rand.NewPCG(1, 2))
	var evs []*Event
	n := 0
	add := func(tenant string, at time.Time) {
		evs = append(evs, walkEvent(tenant, n, at))
		n++
	}
	at := exportEpoch
	for range 60 { // trickle: one every few seconds
		at = at.Add(time.Duration(1+r.IntN(5000)) * time.Millisecond)
		add("acme", at)
		add("globex", at)
	}
	at = at.Add(72 * time.Hour) // a gap of days
	for range 120 {             // a burst: many per millisecond
		at = at.Add(time.Duration(r.IntN(2)) * time.Millisecond)
		add("acme", at)
	}
	for range 25 { // one crowded millisecond
		add("acme", at)
	}
	at = at.Add(400 * 24 * time.Hour) // a gap of more than a year
	add("acme", at)
	add("acme", exportEpoch.Add(-30*365*24*time.Hour)) // long ago
	r.Shuffle(len(evs), func(i, j int) { evs[i], evs[j] = evs[j], evs[i] })
	return evs
}

// collect runs export and checks the batch contract on the way.
func collect(t *testing.T, q Querier, tenant string, f Filter, pageSize int) []*Event {
	t.Helper()
	var got []*Event
	err := export(t.Context(), q, tenant, f, pageSize, func(batch []*Event) error {
		if len(batch) == 0 {
			t.Fatal("empty batch")
		}
		if len(batch) > pageSize && mustMS(batch[0]) != mustMS(batch[len(batch)-1]) {
			t.Fatalf("batch of %d events spans several milliseconds (page size %d)", len(batch), pageSize)
		}
		got = append(got, batch...)
		return nil
	})
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	return got
}

func ids(evs []*Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

func TestExportReturnsExactlyTheMatchingEventsOldestFirst(t *testing.T) {
	all := exportFixture()
	ms := func(d time.Duration) time.Time { return exportEpoch.Add(d) }
	ranges := []struct {
		name     string
		from, to time.Time
		phase    string
	}{
		{name: "unbounded"},
		{name: "from only", from: ms(20 * time.Second)},
		{name: "to only", to: ms(90 * time.Second)},
		{name: "both, inclusive", from: time.UnixMilli(mustMS(all[3])), to: time.UnixMilli(mustMS(all[7]))},
		{name: "sub-millisecond bounds", from: ms(10*time.Second + 300*time.Microsecond), to: ms(100*time.Second + 900*time.Microsecond)},
		{name: "one millisecond", from: time.UnixMilli(mustMS(all[5])), to: time.UnixMilli(mustMS(all[5])).Add(999 * time.Microsecond)},
		{name: "empty range", from: ms(-100 * 365 * 24 * time.Hour), to: ms(-99 * 365 * 24 * time.Hour)},
		{name: "decision phase", phase: PhaseDecision},
		{name: "decision phase, bounded", phase: PhaseDecision, from: ms(time.Minute), to: ms(80 * time.Hour)},
	}
	for _, rg := range ranges {
		for _, tenant := range []string{"acme", "globex", "initech"} {
			// Event times are whole milliseconds: from and to bound them
			// inclusively, so a sub-millisecond from excludes its own
			// millisecond and a sub-millisecond to includes its own.
			var want []*Event
			for _, ev := range all {
				t := time.UnixMilli(mustMS(ev))
				if ev.Tenant == tenant && (rg.phase == "" || ev.Phase == rg.phase) &&
					(rg.from.IsZero() || !t.Before(rg.from)) && (rg.to.IsZero() || !t.After(rg.to)) {
					want = append(want, ev)
				}
			}
			slices.SortFunc(want, cmpEvents)
			for _, pageSize := range []int{1, 2, 3, 7, 50, MaxLimit} {
				t.Run(fmt.Sprintf("%s/%s/page %d", rg.name, tenant, pageSize), func(t *testing.T) {
					q := &memQuerier{events: all}
					got := collect(t, q, tenant, Filter{From: rg.from, To: rg.to, Phase: rg.phase}, pageSize)
					if !slices.Equal(ids(got), ids(want)) {
						t.Fatalf("exported %d events %v,\nwant %d %v", len(got), ids(got), len(want), ids(want))
					}
				})
			}
		}
	}
}

func TestExportQueriesStayProportionalToPages(t *testing.T) {
	// With the log's real page size, a log spread over decades is walked
	// with a bounded number of queries, not one per second of history.
	q := &memQuerier{events: exportFixture()}
	got := collect(t, q, "acme", Filter{}, MaxLimit)
	if len(got) == 0 {
		t.Fatal("nothing exported")
	}
	t.Logf("%d events, %d queries", len(got), q.queries)
	if q.queries > 200 {
		t.Fatalf("export of %d events took %d queries", len(got), q.queries)
	}
}

func TestExportEndsAtTheNewestEventWhenItStarted(t *testing.T) {
	// Every query appends a newer event, as a busy gateway would: the export
	// still ends, with the events that existed when it started.
	base := exportFixture()
	q := &memQuerier{events: slices.Clone(base)}
	var want []*Event
	for _, ev := range base {
		if ev.Tenant == "acme" {
			want = append(want, ev)
		}
	}
	slices.SortFunc(want, cmpEvents)
	newest := mustMS(want[len(want)-1])
	n := 0
	q.after = func() {
		n++
		q.events = append(q.events, walkEvent("acme", 100000+n, time.UnixMilli(newest+int64(n))))
	}
	got := collect(t, q, "acme", Filter{}, 5)
	if !slices.Equal(ids(got), ids(want)) {
		t.Fatalf("exported %v, want %v", ids(got), ids(want))
	}
}

func TestExportStopsOnErrors(t *testing.T) {
	all := exportFixture()
	stop := errors.New("client went away")
	for _, tc := range []struct {
		name    string
		failAt  int
		fnFails bool
		want    error
	}{
		{"first query", 1, false, errMemDown},
		{"while bisecting", 3, false, errMemDown},
		{"mid-walk", 60, false, errMemDown},
		{"the callback", 0, true, stop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &memQuerier{events: all, failAt: tc.failAt}
			calls := 0
			err := export(t.Context(), q, "acme", Filter{}, 3, func([]*Event) error {
				calls++
				if tc.fnFails {
					return stop
				}
				return nil
			})
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if tc.fnFails && calls != 1 {
				t.Fatalf("callback called %d times after failing", calls)
			}
		})
	}
}

func TestExportRefusesBadFilters(t *testing.T) {
	for name, f := range map[string]Filter{
		"cursor":        {Cursor: "abc"},
		"limit":         {Limit: 10},
		"from after to": {From: exportEpoch.Add(time.Hour), To: exportEpoch},
	} {
		t.Run(name, func(t *testing.T) {
			q := &memQuerier{events: exportFixture()}
			err := Export(t.Context(), q, "acme", f, func([]*Event) error { return nil })
			if !errors.Is(err, ErrBadFilter) {
				t.Fatalf("err = %v, want ErrBadFilter", err)
			}
			if q.queries != 0 {
				t.Fatalf("%d queries for a bad filter", q.queries)
			}
		})
	}
}
