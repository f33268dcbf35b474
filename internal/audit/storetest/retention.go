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

// retentionTests are part of Run.
var retentionTests = []struct {
	name string
	fn   func(*testing.T, func(*testing.T) audit.Store)
}{
	{"retention prunes the front of the log and what remains verifies", testPrune},
	{"after retention, checkpoints kept from before still verify and the log goes on", testPruneCheckpoints},
	{"verify after retention detects deletions", testPruneTamper},
	{"retention refuses a log with a gap and prunes the others", testPruneBroken},
	{"concurrent prunes beside appends lose nothing and verify", testPruneConcurrent},
	{"a prune between reading the tree and scanning does not fail verify", testPruneDuringVerify},
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

func testPrune(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{})
	tamperer(t, f.store).SetPruneBatch(2) // six events: three steps
	if res := f.prune(time.Now()); res != (audit.PruneResult{}) {
		t.Fatalf("Prune of an empty store = %+v", res)
	}
	a := f.appendN("acme", 10)
	f.appendN("globex", 3) // later times: untouched

	cutoff := at(a[6])
	if res := f.prune(cutoff); res != (audit.PruneResult{Events: 6, Tenants: 1}) {
		t.Fatalf("Prune = %+v, want 6 events of 1 tenant", res)
	}
	rows := f.rows("acme")
	if len(rows) != 4 || rows[0].LogIndex != 6 || rows[3].LogIndex != 9 {
		t.Fatalf("acme keeps %d rows; want log_index 6..9", len(rows))
	}
	if res := f.verify("acme"); !res.OK || res.EventsChecked != 4 || res.EventsPruned != 6 || res.TreeSize != 10 {
		t.Fatalf("Verify after the prune = %+v", res)
	}
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
	// Everything may go: the tree keeps the log's shape.
	if res := f.prune(at(a[9]).Add(time.Millisecond)); res.Events != 4 { // globex's first is that time
		t.Fatalf("Prune of the rest = %+v, want 4 events", res)
	}
	if res := f.verify("acme"); !res.OK || res.EventsChecked != 0 || res.EventsPruned != 10 {
		t.Fatalf("Verify of a log pruned to nothing = %+v", res)
	}
}

func testPruneCheckpoints(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{CheckpointInterval: time.Nanosecond})
	a := f.appendN("acme", 3)
	early, _ := f.checkpoint("acme") // of 3: all of it will be pruned
	a = append(a, f.appendN("acme", 7)...)
	late, _ := f.checkpoint("acme") // of 10
	f.prune(at(a[5]))               // 5 pruned
	for name, n := range map[string][]byte{"early": early, "late": late} {
		res, err := f.newLog(audit.LogOptions{}).VerifyCheckpoint(f.ctx, "acme", n)
		if err != nil || !res.OK || res.EventsChecked != 5 || res.EventsPruned != 5 {
			t.Fatalf("VerifyCheckpoint(%s) after the prune = %+v, %v", name, res, err)
		}
	}
	// Proofs of what remains still work against the old checkpoint.
	p, err := f.log.InclusionProof(f.ctx, "acme", a[7].ID, 10)
	if err != nil || p.Index != 7 {
		t.Fatalf("InclusionProof after the prune: %+v, %v", p, err)
	}
	// The log goes on from where it was.
	more := f.appendN("acme", 2)
	got, err := f.log.Get(f.ctx, "acme", more[1].ID)
	if err != nil || got.LogIndex == nil || *got.LogIndex != 11 {
		t.Fatalf("event after the prune: %v, log_index %v; want 11", err, got.LogIndex)
	}
	f.mustVerify("acme", 7)
	// A deletion among what remains is still caught against the early
	// checkpoint.
	mustDo(t, tamperer(t, f.store).TamperDelete(f.ctx, a[8].ID))
	res, err := f.newLog(audit.LogOptions{}).VerifyCheckpoint(f.ctx, "acme", early)
	if err != nil || res.OK || res.FirstBadEvent != "(log_index 8)" {
		t.Fatalf("VerifyCheckpoint after a deletion = %+v, %v", res, err)
	}
}

func testPruneTamper(t *testing.T, open func(*testing.T) audit.Store) {
	for _, tc := range []struct {
		name    string
		tamper  func(t *testing.T, f *fixture, tam Tamperer, a []*audit.Event)
		wantBad string
	}{
		{"one more event deleted", func(t *testing.T, f *fixture, tam Tamperer, a []*audit.Event) {
			mustDo(t, tam.TamperDelete(f.ctx, a[7].ID))
		}, "(log_index 7)"},
		{"every remaining event deleted", func(t *testing.T, f *fixture, tam Tamperer, a []*audit.Event) {
			for _, ev := range a[6:] {
				mustDo(t, tam.TamperDelete(f.ctx, ev.ID))
			}
		}, "(log_index 6)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, open, nil, audit.LogOptions{})
			a := f.appendN("acme", 10)
			f.appendN("globex", 2)
			if res := f.prune(at(a[6])); res.Events != 6 {
				t.Fatalf("Prune = %+v, want 6 events", res)
			}
			f.mustVerify("acme", 4)
			tc.tamper(t, f, tamperer(t, f.store), a)
			if res := f.verify("acme"); res.OK || res.FirstBadEvent != tc.wantBad {
				t.Fatalf("Verify = %+v, want not ok with first bad %q", res, tc.wantBad)
			}
			f.mustVerify("globex", 2)
		})
	}
}

func testPruneBroken(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{})
	a := f.appendN("acme", 6)
	g := f.appendN("globex", 4)
	mustDo(t, tamperer(t, f.store).TamperDelete(f.ctx, a[1].ID))

	res, err := f.log.Prune(f.ctx, at(g[3]).Add(time.Hour))
	if !errors.Is(err, audit.ErrBrokenChain) {
		t.Fatalf("Prune over a gap = %v, want ErrBrokenChain", err)
	}
	if res != (audit.PruneResult{Events: 4, Tenants: 1}) {
		t.Fatalf("Prune = %+v, want globex's 4 events pruned", res)
	}
	if rows := f.rows("acme"); len(rows) != 5 {
		t.Fatalf("acme keeps %d rows, want all 5: a broken log is left as evidence", len(rows))
	}
	if res := f.verify("acme"); res.OK || res.FirstBadEvent != "(log_index 1)" {
		t.Fatalf("Verify(acme) = %+v, want the gap reported at log_index 1", res)
	}
	f.mustVerify("globex", 0)
}

func testPruneConcurrent(t *testing.T, open func(*testing.T) audit.Store) {
	const writers, each, pruners = 8, 40, 2
	f := newFixture(t, open, nil, audit.LogOptions{IntegrateInterval: 5 * time.Millisecond})
	tamperer(t, f.store).SetPruneBatch(3)
	// Every event is older than this cutoff: pruners chase the integrator.
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
	f.sync("acme")
	pruned.Add(f.prune(cutoff).Events)

	if rows := f.rows("acme"); len(rows) != 0 {
		t.Fatalf("%d rows left, want none", len(rows))
	}
	if got := pruned.Load(); got != writers*each {
		t.Fatalf("%d events pruned in all, want %d: each exactly once", got, writers*each)
	}
	if got := f.metric(audit.MetricPruned); got != writers*each {
		t.Fatalf("%s = %v, want %d", audit.MetricPruned, got, writers*each)
	}
	if res := f.verify("acme"); !res.OK || res.EventsPruned != writers*each || res.TreeSize != writers*each {
		t.Fatalf("Verify = %+v", res)
	}
}

// pruneOnRead prunes right after its first Tree read, so that the Scan
// that follows sees a log cut after the tree it was given.
type pruneOnRead struct {
	audit.Store
	log    func() *audit.Log
	cutoff time.Time
	armed  atomic.Bool
	once   sync.Once
	err    error
}

func (s *pruneOnRead) Tree(ctx context.Context, tenant string) (audit.TreeHead, error) {
	h, err := s.Store.Tree(ctx, tenant)
	if s.armed.Load() {
		s.once.Do(func() { _, s.err = s.log().Prune(ctx, s.cutoff) })
	}
	return h, err
}

func testPruneDuringVerify(t *testing.T, open func(*testing.T) audit.Store) {
	var w *pruneOnRead
	f := newFixture(t, open, func(s audit.Store) audit.Store {
		w = &pruneOnRead{Store: s}
		return w
	}, audit.LogOptions{})
	w.log = func() *audit.Log { return f.log }
	a := f.appendN("acme", 6)
	w.cutoff = at(a[3])
	w.armed.Store(true)
	res := f.verify("acme")
	if w.err != nil {
		t.Fatalf("Prune: %v", w.err)
	}
	if !res.OK || res.EventsChecked != 3 || res.EventsPruned != 3 {
		t.Fatalf("Verify across a prune = %+v, want ok with the 3 events left", res)
	}
	if got := f.metric(audit.MetricVerify); got != 0 {
		t.Fatalf("%s = %v, want 0: nothing was tampered with", audit.MetricVerify, got)
	}
}
