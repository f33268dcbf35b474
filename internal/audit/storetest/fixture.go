package storetest

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/mod/sumdb/note"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/tlog"
)

// fixture is one fresh store with a Log on top.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	store  audit.Store // the store under test, unwrapped
	under  audit.Store // what the Log writes to (store, maybe wrapped)
	log    *audit.Log
	reg    *prometheus.Registry
	signer *tlog.Signer // the checkpoint key every Log of the fixture shares
}

// newFixture opens a store, wraps it with wrap (may be nil) and starts a Log
// with opts. The Log closes at the end of the test, before the store (whose
// opener registered its cleanup first).
func newFixture(t *testing.T, open func(t *testing.T) audit.Store, wrap func(audit.Store) audit.Store, opts audit.LogOptions) *fixture {
	t.Helper()
	s := open(t)
	f := &fixture{t: t, ctx: t.Context(), store: s, under: s, reg: prometheus.NewRegistry(), signer: newSigner(t)}
	if wrap != nil {
		f.under = wrap(s)
	}
	if opts.Now == nil {
		opts.Now = newClock()
	}
	if opts.Signer == nil {
		opts.Signer = f.signer
	}
	if opts.CheckpointInterval == 0 {
		// Every integration (appendN syncs) signs a checkpoint of the whole
		// tree, so a test's checkpoint covers what it appended; with the
		// default 1 s a background integration during the appends could
		// leave the latest checkpoint short of it (a flaky test under load).
		opts.CheckpointInterval = time.Nanosecond
	}
	opts.Registerer = f.reg
	f.log = f.newLog(opts)
	return f
}

// newLog starts another Log on the fixture's store (a restarted gateway,
// another replica); it closes at the end of the test. Unless the test says
// otherwise, every integration signs a checkpoint, so that the latest
// checkpoint is the whole integrated tree whenever the integrator ran.
func (f *fixture) newLog(opts audit.LogOptions) *audit.Log {
	f.t.Helper()
	if opts.Now == nil {
		opts.Now = newClock()
	}
	if opts.CheckpointInterval == 0 {
		opts.CheckpointInterval = time.Nanosecond
	}
	if opts.Signer == nil {
		opts.Signer = f.signer
	}
	l, err := audit.NewLog(f.under, opts)
	if err != nil {
		f.t.Fatalf("NewLog: %v", err)
	}
	f.t.Cleanup(func() { l.Close() })
	return l
}

// newSigner makes a checkpoint key held in memory.
func newSigner(t *testing.T) *tlog.Signer {
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

// sync integrates the tenant's committed events now.
func (f *fixture) sync(tenant string) {
	f.t.Helper()
	if err := f.log.Sync(f.ctx, tenant); err != nil {
		f.t.Fatalf("Sync(%s): %v", tenant, err)
	}
}

// checkpoint returns the tenant's latest signed checkpoint note and what
// it says.
func (f *fixture) checkpoint(tenant string) ([]byte, tlog.Checkpoint) {
	f.t.Helper()
	n, err := f.log.Checkpoint(f.ctx, tenant)
	if err != nil {
		f.t.Fatalf("Checkpoint(%s): %v", tenant, err)
	}
	cp, err := f.log.Verifier().Open(n, tlog.Origin(tenant))
	if err != nil {
		f.t.Fatalf("the checkpoint of %s does not open: %v\n%s", tenant, err, n)
	}
	return n, cp
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

// appendN appends n events of tenant in order, integrates them and returns
// them with their hashes filled.
func (f *fixture) appendN(tenant string, n int) []*audit.Event {
	f.t.Helper()
	out := f.appendOnly(tenant, n)
	f.sync(tenant)
	return out
}

// appendOnly is appendN without integrating.
func (f *fixture) appendOnly(tenant string, n int) []*audit.Event {
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

// rows returns the tenant's integrated rows as Scan reports them, in log
// order.
func (f *fixture) rows(tenant string) []audit.Row {
	f.t.Helper()
	var rows []audit.Row
	err := f.store.Scan(f.ctx, tenant, 0, math.MaxInt64, func(r audit.Row) error {
		r.Raw, r.Leaf = slices.Clone(r.Raw), slices.Clone(r.Leaf)
		rows = append(rows, r)
		return nil
	})
	if err != nil {
		f.t.Fatalf("Scan: %v", err)
	}
	return rows
}

// raw returns the stored raw JSON of integrated event id.
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

// rewriteTree plays the attacker who recomputes the tenant's whole tree
// from the events as they now are in the database (nodes, state, root),
// and drops the stored checkpoint, which they cannot re-sign.
func (f *fixture) rewriteTree(tam Tamperer, tenant string) {
	f.t.Helper()
	var leaves [][]byte
	for _, r := range f.rows(tenant) {
		b, err := audit.HashBytes(r.Hash)
		if err != nil {
			f.t.Fatal(err)
		}
		leaves = append(leaves, b)
	}
	integ, err := tlog.Integrate(tlog.State{}, leaves)
	if err != nil {
		f.t.Fatal(err)
	}
	st, err := integ.State.MarshalBinary()
	if err != nil {
		f.t.Fatal(err)
	}
	if err := tam.TamperTree(f.ctx, tenant, int64(len(leaves)), st, integ.Root, integ.Nodes); err != nil {
		f.t.Fatalf("tamper: %v", err)
	}
	if err := tam.TamperCheckpointNote(f.ctx, tenant, nil, 0); err != nil {
		f.t.Fatalf("tamper: %v", err)
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

// legacyChain builds events of the hash-chain era, as the previous gateway
// wrote them: chain, seq from 1, each prev_hash its predecessor's hash,
// the hash over all of it. It returns the events and their raw JSON.
func legacyChain(t *testing.T, tenant, chain string, from int, n int) ([]*audit.Event, [][]byte) {
	t.Helper()
	clock := newClock()
	var evs []*audit.Event
	var raws [][]byte
	prev := ""
	for i := range n {
		ev := event(tenant, from+i)
		ev.ID = fmt.Sprintf("legacy-%s-%s-%d", tenant, chain, i+1)
		ev.Time = audit.FormatTime(clock().Add(-time.Hour))
		ev.Chain, ev.Seq, ev.PrevHash = chain, int64(i+1), prev
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		ev.Hash, err = audit.ComputeHash(b)
		if err != nil {
			t.Fatal(err)
		}
		raws = append(raws, []byte(canonical(t, ev)))
		evs = append(evs, ev)
		prev = ev.Hash
	}
	return evs, raws
}
