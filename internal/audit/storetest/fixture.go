package storetest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/internal/audit"
)

// fixture is one fresh store with a Log on top.
type fixture struct {
	t     *testing.T
	ctx   context.Context
	store audit.Store // the store under test, unwrapped
	log   *audit.Log
	reg   *prometheus.Registry
}

// newFixture opens a store, wraps it with wrap (may be nil) and starts a Log
// with opts. The Log closes at the end of the test, before the store (whose
// opener registered its cleanup first).
func newFixture(t *testing.T, open func(t *testing.T) audit.Store, wrap func(audit.Store) audit.Store, opts audit.LogOptions) *fixture {
	t.Helper()
	s := open(t)
	f := &fixture{t: t, ctx: t.Context(), store: s, reg: prometheus.NewRegistry()}
	var under audit.Store = s
	if wrap != nil {
		under = wrap(s)
	}
	if opts.Now == nil {
		opts.Now = newClock()
	}
	opts.Registerer = f.reg
	l, err := audit.NewLog(under, opts)
	if err != nil {
		t.Fatalf("NewLog: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	f.log = l
	return f
}

// newClock is a clock that advances one millisecond per reading, so every
// event gets its own, increasing time.
func newClock() func() time.Time {
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	var n atomic.Int64
	return func() time.Time { return base.Add(time.Duration(n.Add(1)) * time.Millisecond) }
}

var (
	toolNames  = []string{"read-file", "write-file", "grep"}
	principals = []string{"alice", "bob"}
)

// event is the i-th test event of tenant, with filterable fields spread so
// that every filter value matches some events and not others.
func event(tenant string, i int) *audit.Event {
	phase, outcome := audit.PhaseDecision, []string{"allow", "denied"}[i/2%2]
	if i%2 == 1 {
		phase, outcome = audit.PhaseResult, []string{"ok", "tool_error"}[i/2%2]
	}
	ev := &audit.Event{
		Tenant:         tenant,
		Principal:      principals[i%len(principals)],
		Client:         "platform-a",
		CallID:         fmt.Sprintf("call-%d", i/2),
		DecisionID:     fmt.Sprintf("dec-%d", i/2),
		SessionID:      fmt.Sprintf("s-%d", i%3),
		Tool:           toolNames[i%len(toolNames)],
		Action:         "fs.read",
		Phase:          phase,
		Outcome:        outcome,
		Reasons:        []string{"rule matched"},
		PolicyRevision: "rev-1",
		RequestDigest:  "sha256:0000",
		Input: map[string]any{
			"args":      map[string]any{"path": fmt.Sprintf("docs/%d.md", i), "limit": i},
			"resources": []any{map[string]any{"type": "file", "path": fmt.Sprintf("docs/%d.md", i), "access": "read"}},
		},
		DurationsUS: map[string]int64{"prepare": int64(i), "decide": 12},
	}
	if phase == audit.PhaseResult {
		ev.Result = &audit.ResultInfo{Bytes: i * 10}
	}
	return ev
}

// appendN appends n events of tenant in order and returns them with their
// chain fields filled.
func (f *fixture) appendN(tenant string, n int) []*audit.Event {
	f.t.Helper()
	out := make([]*audit.Event, n)
	for i := range n {
		ev := event(tenant, i)
		if err := f.log.Append(f.ctx, ev); err != nil {
			f.t.Fatalf("Append %s #%d: %v", tenant, i, err)
		}
		out[i] = ev
	}
	return out
}

// rows returns the tenant's stored rows as Scan reports them.
func (f *fixture) rows(tenant string) []audit.Row {
	f.t.Helper()
	var rows []audit.Row
	err := f.store.Scan(f.ctx, tenant, func(r audit.Row) error {
		r.Raw = slices.Clone(r.Raw)
		rows = append(rows, r)
		return nil
	})
	if err != nil {
		f.t.Fatalf("Scan: %v", err)
	}
	return rows
}

// raw returns the stored raw JSON of event id.
func (f *fixture) raw(tenant, id string) []byte {
	f.t.Helper()
	for _, r := range f.rows(tenant) {
		if r.ID == id {
			return r.Raw
		}
	}
	f.t.Fatalf("event %s not stored", id)
	return nil
}

// verify runs Verify and fails the test on an error.
func (f *fixture) verify(tenant string) audit.VerifyResult {
	f.t.Helper()
	res, err := f.log.Verify(f.ctx, tenant)
	if err != nil {
		f.t.Fatalf("Verify(%s): %v", tenant, err)
	}
	return res
}

func (f *fixture) mustVerify(tenant string, n int) {
	f.t.Helper()
	if res := f.verify(tenant); !res.OK || res.EventsChecked != n {
		f.t.Fatalf("Verify(%s) = %+v, want ok with %d events", tenant, res, n)
	}
}

// all pages through every event of tenant matching flt.
func (f *fixture) all(tenant string, flt audit.Filter) []*audit.Event {
	f.t.Helper()
	var out []*audit.Event
	for pages := 0; ; pages++ {
		if pages > 10000 {
			f.t.Fatal("paging does not end")
		}
		p, err := f.log.Query(f.ctx, tenant, flt)
		if err != nil {
			f.t.Fatalf("Query(%+v): %v", flt, err)
		}
		out = append(out, p.Events...)
		if p.NextCursor == "" {
			return out
		}
		flt.Cursor = p.NextCursor
	}
}

// metric reads a counter or gauge from the fixture's registry (0 if absent).
func (f *fixture) metric(name string, labels ...string) float64 {
	f.t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		f.t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return 0
}

// waitFor polls cond until it holds; the test's own timeout bounds it.
// It waits for a state, it asserts nothing about time.
func (f *fixture) waitFor(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			f.t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// ids lists event ids.
func ids(evs []*audit.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

// newestFirst sorts events the way Query pages them.
func newestFirst(evs []*audit.Event) []*audit.Event {
	out := slices.Clone(evs)
	slices.SortFunc(out, func(a, b *audit.Event) int {
		ta, tb := timeMS(a), timeMS(b)
		if c := cmp.Compare(tb, ta); c != 0 {
			return c
		}
		return cmp.Compare(b.ID, a.ID)
	})
	return out
}

func timeMS(ev *audit.Event) int64 {
	t, err := time.Parse(time.RFC3339Nano, ev.Time)
	if err != nil {
		panic(err)
	}
	return t.UnixMilli()
}

// canonical is the RFC 8785 form of v, for comparing events.
func canonical(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	jv := jsontext.Value(b)
	if err := jv.Canonicalize(); err != nil {
		t.Fatalf("canonicalize: %v", err)
	}
	return string(jv)
}

// editRaw decodes raw, lets edit change members, and re-encodes it
// canonically; with rehash it also recomputes "hash" as an attacker who
// knows the (public) hash definition would.
func editRaw(t *testing.T, raw []byte, rehash bool, edit func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("decode raw: %v", err)
	}
	edit(m)
	out := []byte(canonical(t, m))
	if rehash {
		h, err := audit.ComputeHash(out)
		if err != nil {
			t.Fatalf("ComputeHash: %v", err)
		}
		m["hash"] = h
		out = []byte(canonical(t, m))
	}
	return out
}
