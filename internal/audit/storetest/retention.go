package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
)

// RetentionTamperer lets the retention tests edit checkpoints as an
// attacker with write access would, and shrink prune steps so that a
// handful of events takes several transactions. Stores implement it in
// their own test files only, like Tamperer.
type RetentionTamperer interface {
	// TamperCheckpoint overwrites one column of the checkpoint of
	// (tenant, chain): tenant, chain, seq, hash, pruned_before_ms,
	// created_ms or checkpoint_hash.
	TamperCheckpoint(ctx context.Context, tenant, chain, column string, value any) error
	// TamperCheckpointDelete removes the checkpoint of (tenant, chain).
	TamperCheckpointDelete(ctx context.Context, tenant, chain string) error
	// SetPruneBatch bounds the events one prune transaction deletes.
	SetPruneBatch(n int64)
}

// retentionTests are part of Run.
var retentionTests = []struct {
	name string
	fn   func(*testing.T, func(*testing.T) audit.Store)
}{
	{"retention prunes old prefixes and what remains verifies", testPrune},
	{"retention keeps each chain's head and appends continue the chain", testPruneKeepsHead},
	{"retention cuts every chain of a tenant", testPruneTwoChains},
	{"verify after retention detects deletions and checkpoint edits", testPruneTamper},
	{"retention refuses a broken chain and prunes the others", testPruneBroken},
	{"concurrent prunes beside appends lose nothing and verify", testPruneConcurrent},
	{"a prune between reading checkpoints and scanning does not fail verify", testPruneDuringVerify},
}

func retentionTamperer(t *testing.T, s audit.Store) RetentionTamperer {
	t.Helper()
	rt, ok := s.(RetentionTamperer)
	if !ok {
		t.Fatalf("%T does not implement storetest.RetentionTamperer", s)
	}
	return rt
}

// at is the time of ev.
func at(ev *audit.Event) time.Time {
	return time.UnixMilli(timeMS(ev)).UTC()
}

// prune runs Log.Prune and fails the test on an error.
func (f *fixture) prune(cutoff time.Time) audit.PruneResult {
	f.t.Helper()
	res, err := f.log.Prune(f.ctx, cutoff)
	if err != nil {
		f.t.Fatalf("Prune(%v): %v", cutoff, err)
	}
	return res
}

func (f *fixture) checkpoints(tenant string) map[string]audit.Checkpoint {
	f.t.Helper()
	cps, err := f.store.Checkpoints(f.ctx, tenant)
	if err != nil {
		f.t.Fatalf("Checkpoints(%s): %v", tenant, err)
	}
	return cps
}

func testPrune(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{})
	retentionTamperer(t, f.store).SetPruneBatch(2) // six events: three steps
	if res := f.prune(time.Now()); res != (audit.PruneResult{}) {
		t.Fatalf("Prune of an empty store = %+v", res)
	}
	a := f.appendN("acme", 10)
	f.appendN("globex", 3) // later times: untouched

	cutoff := at(a[6])
	if res := f.prune(cutoff); res != (audit.PruneResult{Events: 6, Chains: 1}) {
		t.Fatalf("Prune = %+v, want 6 events of 1 chain", res)
	}
	rows := f.rows("acme")
	if len(rows) != 4 || rows[0].Seq != 7 || rows[3].Seq != 10 {
		t.Fatalf("acme keeps %d rows; want seq 7..10", len(rows))
	}
	cps := f.checkpoints("acme")
	cp, ok := cps["main"]
	if len(cps) != 1 || !ok || cp.Tenant != "acme" || cp.Seq != 6 || cp.Hash != a[5].Hash ||
		cp.PrunedBeforeMS != cutoff.UnixMilli() || cp.CheckpointHash != audit.ComputeCheckpointHash(cp) {
		t.Fatalf("Checkpoints(acme) = %+v; want main at seq 6, hash %s, cutoff %d", cps, a[5].Hash, cutoff.UnixMilli())
	}
	if cps := f.checkpoints("globex"); len(cps) != 0 {
		t.Fatalf("Checkpoints(globex) = %+v, want none", cps)
	}
	f.mustVerify("acme", 4)
	f.mustVerify("globex", 3)
	if got := f.metric(audit.MetricPruned); got != 6 {
		t.Fatalf("%s = %v, want 6", audit.MetricPruned, got)
	}
	if _, err := f.log.Get(f.ctx, "acme", a[0].ID); !errors.Is(err, audit.ErrNotFound) {
		t.Fatalf("Get(pruned event) = %v, want ErrNotFound", err)
	}
	if got := f.all("acme", audit.Filter{}); len(got) != 4 {
		t.Fatalf("Query after prune returns %d events, want 4", len(got))
	}
	if res := f.prune(cutoff); res != (audit.PruneResult{}) {
		t.Fatalf("second Prune with the same cutoff = %+v, want nothing", res)
	}
	f.mustVerify("acme", 4)
}

func testPruneKeepsHead(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{})
	a := f.appendN("acme", 5)
	future := at(a[4]).Add(365 * 24 * time.Hour)
	if res := f.prune(future); res.Events != 4 {
		t.Fatalf("Prune(everything) = %+v, want 4 events: the head stays", res)
	}
	heads, err := f.store.Heads(f.ctx, "main")
	if err != nil || heads["acme"] != (audit.Head{Seq: 5, Hash: a[4].Hash}) {
		t.Fatalf("Heads after prune = %v, %v; want acme at seq 5", heads, err)
	}
	f.mustVerify("acme", 1)

	ev := event("acme", 5)
	if err := f.log.Append(f.ctx, ev); err != nil || ev.Seq != 6 || ev.PrevHash != a[4].Hash {
		t.Fatalf("Append after prune: seq %d prev %q, %v; want seq 6 after the head", ev.Seq, ev.PrevHash, err)
	}
	f.mustVerify("acme", 2)

	// A restarted gateway reloads the head from what is left.
	if err := f.log.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := audit.NewLog(f.store, audit.LogOptions{Now: newClock()})
	if err != nil {
		t.Fatalf("NewLog: %v", err)
	}
	t.Cleanup(func() { l2.Close() })
	f.log = l2
	ev = event("acme", 6)
	if err := l2.Append(f.ctx, ev); err != nil || ev.Seq != 7 {
		t.Fatalf("Append on a new log after prune: seq %d, %v; want 7", ev.Seq, err)
	}
	f.mustVerify("acme", 3)

	// A second cut moves the checkpoint; the new log's own head stays.
	if res := f.prune(future); res.Events != 2 {
		t.Fatalf("second Prune = %+v, want 2 events", res)
	}
	if cp := f.checkpoints("acme")["main"]; cp.Seq != 6 {
		t.Fatalf("checkpoint after the second cut at seq %d, want 6", cp.Seq)
	}
	f.mustVerify("acme", 1)
}

func testPruneTwoChains(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{Chain: "a"})
	b, err := audit.NewLog(f.store, audit.LogOptions{Chain: "b", Now: newClock()})
	if err != nil {
		t.Fatalf("NewLog: %v", err)
	}
	defer b.Close()
	var last *audit.Event
	for i := range 8 {
		l := f.log
		if i%2 == 1 {
			l = b
		}
		last = event("acme", i)
		if err := l.Append(f.ctx, last); err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
	if res := f.prune(at(last).Add(time.Hour)); res != (audit.PruneResult{Events: 6, Chains: 2}) {
		t.Fatalf("Prune = %+v, want 3 events from each of 2 chains", res)
	}
	if cps := f.checkpoints("acme"); len(cps) != 2 || cps["a"].Seq != 3 || cps["b"].Seq != 3 {
		t.Fatalf("Checkpoints = %+v, want a and b at seq 3", cps)
	}
	f.mustVerify("acme", 2)
	if res, err := b.Verify(f.ctx, "acme"); err != nil || !res.OK || res.EventsChecked != 2 {
		t.Fatalf("Verify from chain b = %+v, %v", res, err)
	}
}

func testPruneTamper(t *testing.T, open func(*testing.T) audit.Store) {
	type env struct {
		ctx context.Context
		tam Tamperer
		rt  RetentionTamperer
		a   []*audit.Event // acme, seq 1..10; 1..6 pruned
	}
	cpBad := "(checkpoint of chain main)"
	tests := []struct {
		name    string
		tamper  func(t *testing.T, e env)
		wantBad func(e env) string
		// globexBad: the tampering also breaks the other tenant.
		globexBad bool
	}{
		{"one more event deleted", func(t *testing.T, e env) {
			mustDo(t, e.tam.TamperDelete(e.ctx, e.a[6].ID))
		}, func(e env) string { return e.a[7].ID }, false},
		{"every remaining event deleted", func(t *testing.T, e env) {
			for _, ev := range e.a[6:] {
				mustDo(t, e.tam.TamperDelete(e.ctx, ev.ID))
			}
		}, func(env) string { return cpBad }, false},
		{"checkpoint deleted", func(t *testing.T, e env) {
			mustDo(t, e.rt.TamperCheckpointDelete(e.ctx, "acme", "main"))
		}, func(e env) string { return e.a[6].ID }, false},
		{"checkpoint seq edited", func(t *testing.T, e env) {
			mustDo(t, e.rt.TamperCheckpoint(e.ctx, "acme", "main", "seq", 7))
		}, func(env) string { return cpBad }, false},
		{"checkpoint hash edited", func(t *testing.T, e env) {
			mustDo(t, e.rt.TamperCheckpoint(e.ctx, "acme", "main", "hash", e.a[6].Hash))
		}, func(env) string { return cpBad }, false},
		{"checkpoint cutoff edited", func(t *testing.T, e env) {
			mustDo(t, e.rt.TamperCheckpoint(e.ctx, "acme", "main", "pruned_before_ms", 1))
		}, func(env) string { return cpBad }, false},
		{"checkpoint creation time edited", func(t *testing.T, e env) {
			mustDo(t, e.rt.TamperCheckpoint(e.ctx, "acme", "main", "created_ms", 1))
		}, func(env) string { return cpBad }, false},
		{"checkpoint_hash edited", func(t *testing.T, e env) {
			mustDo(t, e.rt.TamperCheckpoint(e.ctx, "acme", "main", "checkpoint_hash", audit.HashPrefix+"00"))
		}, func(env) string { return cpBad }, false},
		{"checkpoint moved to another tenant", func(t *testing.T, e env) {
			mustDo(t, e.rt.TamperCheckpoint(e.ctx, "acme", "main", "tenant", "globex"))
		}, func(e env) string { return e.a[6].ID }, true},
		{"checkpoint and next event moved together", func(t *testing.T, e env) {
			// Deleting seq 7 and pointing the checkpoint at it without
			// its hash leaves seq 8's prev_hash unmatched.
			mustDo(t, e.tam.TamperDelete(e.ctx, e.a[6].ID))
			mustDo(t, e.rt.TamperCheckpoint(e.ctx, "acme", "main", "seq", 7))
		}, func(env) string { return cpBad }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, open, nil, audit.LogOptions{})
			a := f.appendN("acme", 10)
			f.appendN("globex", 2)
			if res := f.prune(at(a[6])); res.Events != 6 {
				t.Fatalf("Prune = %+v, want 6 events", res)
			}
			f.mustVerify("acme", 4)
			tam, ok := f.store.(Tamperer)
			if !ok {
				t.Fatalf("%T does not implement storetest.Tamperer", f.store)
			}
			e := env{ctx: f.ctx, tam: tam, rt: retentionTamperer(t, f.store), a: a}
			tc.tamper(t, e)
			res := f.verify("acme")
			if want := tc.wantBad(e); res.OK || res.FirstBadEvent != want {
				t.Fatalf("Verify = %+v, want not ok with first bad %q", res, want)
			}
			if res := f.verify("globex"); res.OK == tc.globexBad {
				t.Fatalf("Verify(globex) = %+v, want ok=%v", res, !tc.globexBad)
			}
		})
	}
}

func testPruneBroken(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{})
	a := f.appendN("acme", 6)
	g := f.appendN("globex", 4)
	tam, ok := f.store.(Tamperer)
	if !ok {
		t.Fatalf("%T does not implement storetest.Tamperer", f.store)
	}
	mustDo(t, tam.TamperDelete(f.ctx, a[1].ID))

	res, err := f.log.Prune(f.ctx, at(g[3]).Add(time.Hour))
	if !errors.Is(err, audit.ErrBrokenChain) {
		t.Fatalf("Prune over a gap = %v, want ErrBrokenChain", err)
	}
	if res != (audit.PruneResult{Events: 3, Chains: 1}) {
		t.Fatalf("Prune = %+v, want globex's 3 events pruned", res)
	}
	if rows := f.rows("acme"); len(rows) != 5 {
		t.Fatalf("acme keeps %d rows, want all 5: a broken chain is left as evidence", len(rows))
	}
	if res := f.verify("acme"); res.OK || res.FirstBadEvent != a[2].ID {
		t.Fatalf("Verify(acme) = %+v, want the gap reported at %s", res, a[2].ID)
	}
	f.mustVerify("globex", 1)

	// An edited checkpoint is refused too.
	rt := retentionTamperer(t, f.store)
	mustDo(t, rt.TamperCheckpoint(f.ctx, "globex", "main", "created_ms", 1))
	g2 := f.appendN("globex", 2)
	if _, err := f.log.Prune(f.ctx, at(g2[1]).Add(time.Hour)); !errors.Is(err, audit.ErrBrokenChain) {
		t.Fatalf("Prune after a checkpoint edit = %v, want ErrBrokenChain", err)
	}
	if rows := f.rows("globex"); len(rows) != 3 {
		t.Fatalf("globex keeps %d rows, want 3", len(rows))
	}
}

// mustDo fails the test when a tampering step did not apply.
func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("tamper: %v", err)
	}
}

func testPruneConcurrent(t *testing.T, open func(*testing.T) audit.Store) {
	const writers, each, pruners = 8, 40, 2
	f := newFixture(t, open, nil, audit.LogOptions{})
	retentionTamperer(t, f.store).SetPruneBatch(3)
	// Every event is older than this cutoff: pruners chase the head.
	cutoff := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

	var appending sync.WaitGroup
	for w := range writers {
		appending.Go(func() {
			for i := range each {
				if err := f.log.Append(f.ctx, event("acme", w*each+i)); err != nil {
					t.Errorf("Append: %v", err)
					return
				}
			}
		})
	}
	stop := make(chan struct{})
	var pruned atomic.Int64
	var pruning sync.WaitGroup
	for range pruners {
		pruning.Go(func() {
			for {
				res, err := f.log.Prune(f.ctx, cutoff)
				if err != nil {
					t.Errorf("Prune: %v", err)
					return
				}
				pruned.Add(res.Events)
				select {
				case <-stop:
					return
				default:
				}
			}
		})
	}
	appending.Wait()
	close(stop)
	pruning.Wait()
	pruned.Add(f.prune(cutoff).Events)

	rows := f.rows("acme")
	if len(rows) != 1 || rows[0].Seq != writers*each {
		t.Fatalf("%d rows left, want only the head at seq %d", len(rows), writers*each)
	}
	if got := pruned.Load(); got != writers*each-1 {
		t.Fatalf("%d events pruned in all, want %d: each exactly once", got, writers*each-1)
	}
	if got := f.metric(audit.MetricPruned); got != writers*each-1 {
		t.Fatalf("%s = %v, want %d", audit.MetricPruned, got, writers*each-1)
	}
	f.mustVerify("acme", 1)
}

// pruneOnRead prunes right after its first Checkpoints read, so that the
// Scan that follows sees a chain cut after the checkpoints it was given.
type pruneOnRead struct {
	audit.Store
	cutoff time.Time
	once   sync.Once
	err    error
}

func (s *pruneOnRead) Checkpoints(ctx context.Context, tenant string) (map[string]audit.Checkpoint, error) {
	cps, err := s.Store.Checkpoints(ctx, tenant)
	s.once.Do(func() { _, s.err = s.Store.Prune(ctx, s.cutoff) })
	return cps, err
}

func testPruneDuringVerify(t *testing.T, open func(*testing.T) audit.Store) {
	var w *pruneOnRead
	f := newFixture(t, open, func(s audit.Store) audit.Store {
		w = &pruneOnRead{Store: s}
		return w
	}, audit.LogOptions{})
	a := f.appendN("acme", 6)
	w.cutoff = at(a[3])
	res := f.verify("acme")
	if w.err != nil {
		t.Fatalf("Prune: %v", w.err)
	}
	if cp := f.checkpoints("acme")["main"]; cp.Seq != 3 {
		t.Fatalf("the prune in between cut at seq %d, want 3", cp.Seq)
	}
	if !res.OK || res.EventsChecked != 3 {
		t.Fatalf("Verify across a prune = %+v, want ok with the 3 events left", res)
	}
	if got := f.metric(audit.MetricVerify); got != 0 {
		t.Fatalf("%s = %v, want 0: nothing was tampered with", audit.MetricVerify, got)
	}
}
