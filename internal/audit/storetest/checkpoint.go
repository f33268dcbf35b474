package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/tlog"
)

// checkpointTests are part of Run: the tenant's Merkle tree, its signed
// checkpoints and proofs, and verification against a checkpoint an
// auditor kept.
var checkpointTests = []struct {
	name string
	fn   func(*testing.T, func(*testing.T) audit.Store)
}{
	{"checkpoints are signed, cover new events and extend each other", testCheckpoints},
	{"inclusion and consistency proofs verify against checkpoints", testProofs},
	{"verify against a saved checkpoint detects deletion, truncation, rewriting and reordering", testVerifyCheckpoint},
	{"a checkpoint that does not open is refused", testBadCheckpoint},
	{"the key never signs a tree that does not extend its latest checkpoint", testRefuseToSign},
	{"events of the hash-chain era are integrated first and still verify", testLegacy},
}

func testCheckpoints(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{CheckpointInterval: time.Nanosecond})
	// Before any event: the empty tree, signed.
	n0, cp0 := f.checkpoint("acme")
	if cp0.Size != 0 || string(cp0.Root) != string(tlog.EmptyRoot()) {
		t.Fatalf("checkpoint of an empty log: size %d", cp0.Size)
	}
	f.appendN("acme", 5)
	n1, cp1 := f.checkpoint("acme")
	if cp1.Size != 5 || !strings.HasPrefix(string(n1), "toolgate/acme\n5\n") {
		t.Fatalf("checkpoint after 5 events:\n%s", n1)
	}
	if !strings.Contains(string(n1), "\n\n— "+tlog.KeyName+" ") {
		t.Fatalf("checkpoint is not a signed note:\n%s", n1)
	}
	f.appendN("acme", 3)
	_, cp2 := f.checkpoint("acme")
	if cp2.Size != 8 {
		t.Fatalf("checkpoint after 8 events has size %d", cp2.Size)
	}
	for _, from := range []tlog.Checkpoint{cp0, cp1} {
		p, err := f.log.ConsistencyProof(f.ctx, "acme", int64(from.Size), int64(cp2.Size))
		if err != nil {
			t.Fatal(err)
		}
		if err := tlog.VerifyConsistency(p, from, cp2); err != nil {
			t.Fatalf("consistency %d -> %d: %v", from.Size, cp2.Size, err)
		}
	}
	if got := f.metric(audit.MetricCheckpoints); got < 2 {
		t.Fatalf("%s = %v, want >= 2", audit.MetricCheckpoints, got)
	}
	// The verifier key opens them; another tenant's origin does not.
	v, err := tlog.NewVerifier(f.log.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Open(n1, tlog.Origin("acme")); err != nil {
		t.Fatalf("VerifierKey does not open the checkpoint: %v", err)
	}
	if _, err := v.Open(n1, tlog.Origin("globex")); !errors.Is(err, tlog.ErrWrongOrigin) {
		t.Fatalf("acme's checkpoint opened as globex's: %v", err)
	}
	_ = n0
	// The checkpoint of the latest tree comes within the interval even
	// without new events: here at once.
	f.appendN("globex", 2)
	if _, cp := f.checkpoint("globex"); cp.Size != 2 {
		t.Fatalf("globex checkpoint of size %d, want 2", cp.Size)
	}
	// A checkpoint covers new events once the latest is an interval old.
	h := newFixture(t, open, nil, audit.LogOptions{IntegrateInterval: time.Hour, CheckpointInterval: time.Hour})
	h.appendN("acme", 3)
	h.appendN("acme", 2)
	if _, cp := h.checkpoint("acme"); cp.Size != 3 {
		t.Fatalf("with an hour's interval the checkpoint has size %d, want the first one's 3", cp.Size)
	}
	// A tree with events but no signed checkpoint says so (a log that
	// does not integrate on its own, so that nothing signs meanwhile).
	g := newFixture(t, open, nil, audit.LogOptions{IntegrateInterval: time.Hour})
	g.appendN("globex", 2)
	mustDo(t, tamperer(t, g.store).TamperCheckpointNote(g.ctx, "globex", nil, 0))
	if _, err := g.log.Checkpoint(g.ctx, "globex"); !errors.Is(err, audit.ErrNoCheckpoint) || !errors.Is(err, audit.ErrNotFound) {
		t.Fatalf("Checkpoint of a tree without one = %v, want ErrNoCheckpoint", err)
	}
}

func testProofs(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{CheckpointInterval: time.Nanosecond})
	a := f.appendN("acme", 13)
	f.appendN("globex", 3)
	_, cp := f.checkpoint("acme")
	for i, ev := range a {
		for _, size := range []int64{0, int64(i + 1), 13} {
			p, err := f.log.InclusionProof(f.ctx, "acme", ev.ID, size)
			if err != nil {
				t.Fatalf("InclusionProof(%d, size %d): %v", i, size, err)
			}
			if p.Index != uint64(i) {
				t.Fatalf("proof of event %d has index %d", i, p.Index)
			}
			leaf, _ := audit.HashBytes(ev.Hash)
			if size == 0 || size == 13 {
				if err := tlog.VerifyInclusion(p, leaf, cp); err != nil {
					t.Fatalf("inclusion of event %d: %v", i, err)
				}
			}
		}
	}
	for _, tc := range []struct {
		name string
		err  error
		fn   func() error
	}{
		{"size above the tree", audit.ErrProofRange, func() error {
			_, err := f.log.InclusionProof(f.ctx, "acme", a[0].ID, 14)
			return err
		}},
		{"event not below size", audit.ErrProofRange, func() error {
			_, err := f.log.InclusionProof(f.ctx, "acme", a[5].ID, 5)
			return err
		}},
		{"another tenant's event", audit.ErrNotFound, func() error {
			_, err := f.log.InclusionProof(f.ctx, "globex", a[0].ID, 0)
			return err
		}},
		{"consistency from above to", audit.ErrProofRange, func() error {
			_, err := f.log.ConsistencyProof(f.ctx, "acme", 5, 4)
			return err
		}},
		{"consistency to above the tree", audit.ErrProofRange, func() error {
			_, err := f.log.ConsistencyProof(f.ctx, "acme", 1, 14)
			return err
		}},
	} {
		if err := tc.fn(); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
	// An event not yet integrated has no proof yet.
	slow := f.newLog(audit.LogOptions{IntegrateInterval: time.Hour, IntegrateBatch: 1 << 20})
	ev := event("acme", 20)
	if err := slow.Append(f.ctx, ev); err != nil {
		t.Fatal(err)
	}
	if _, err := slow.InclusionProof(f.ctx, "acme", ev.ID, 0); !errors.Is(err, audit.ErrNotIntegrated) || !errors.Is(err, audit.ErrNotFound) {
		t.Fatalf("proof of a pending event = %v, want ErrNotIntegrated", err)
	}
}

// tamperCase is one attack on a log under a saved checkpoint.
type tamperCase struct {
	name string
	// tamper plays the attacker; n is the number of events the saved
	// checkpoint covers, a the tenant's events.
	tamper func(t *testing.T, f *fixture, tam Tamperer, a []*audit.Event)
	// want is a substring of the problem reported.
	want string
}

func testVerifyCheckpoint(t *testing.T, open func(*testing.T) audit.Store) {
	const n = 60
	mustDo := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("tamper: %v", err)
		}
	}
	deleteLast := func(k int, shrink bool) func(*testing.T, *fixture, Tamperer, []*audit.Event) {
		return func(t *testing.T, f *fixture, tam Tamperer, a []*audit.Event) {
			for _, ev := range a[len(a)-k:] {
				mustDo(t, tam.TamperDelete(f.ctx, ev.ID))
			}
			if shrink {
				f.rewriteTree(tam, "acme")
			}
		}
	}
	rewrite := func(t *testing.T, f *fixture, tam Tamperer, ev *audit.Event) {
		raw := editRaw(t, f.raw("acme", ev.ID), true, func(m map[string]any) { m["outcome"] = "allow" })
		mustDo(t, tam.TamperRaw(f.ctx, ev.ID, raw))
		h, _ := audit.ComputeHash(raw)
		mustDo(t, tam.TamperColumn(f.ctx, ev.ID, "hash", h))
		mustDo(t, tam.TamperColumn(f.ctx, ev.ID, "outcome", "allow"))
	}
	tests := []tamperCase{
		{"last event deleted", deleteLast(1, false), "deleted"},
		{"last 49 events deleted", deleteLast(49, false), "deleted"},
		{"last event deleted, tree shrunk to match", deleteLast(1, true), "commits to 60"},
		{"last 49 events deleted, tree shrunk to match", deleteLast(49, true), "commits to 60"},
		{"the tenant's whole log deleted", func(t *testing.T, f *fixture, tam Tamperer, a []*audit.Event) {
			mustDo(t, tam.TamperDeleteTenant(f.ctx, "acme"))
		}, "holds 0 events"},
		{"last event edited with a recomputed hash and tree", func(t *testing.T, f *fixture, tam Tamperer, a []*audit.Event) {
			rewrite(t, f, tam, a[n-1])
			f.rewriteTree(tam, "acme")
		}, "changed, replaced or reordered"},
		{"a suffix rewritten with recomputed hashes and tree", func(t *testing.T, f *fixture, tam Tamperer, a []*audit.Event) {
			for _, ev := range a[n-10:] {
				rewrite(t, f, tam, ev)
			}
			f.rewriteTree(tam, "acme")
		}, "changed, replaced or reordered"},
		{"two events reordered, tree recomputed", func(t *testing.T, f *fixture, tam Tamperer, a []*audit.Event) {
			mustDo(t, tam.TamperColumn(f.ctx, a[10].ID, "log_index", -1))
			mustDo(t, tam.TamperColumn(f.ctx, a[40].ID, "log_index", 10))
			mustDo(t, tam.TamperColumn(f.ctx, a[10].ID, "log_index", 40))
			f.rewriteTree(tam, "acme")
		}, "changed, replaced or reordered"},
		{"last event replaced by a new one", func(t *testing.T, f *fixture, tam Tamperer, a []*audit.Event) {
			deleteLast(1, true)(t, f, tam, a)
			f.appendN("acme", 1) // the gateway refuses to sign; the saved checkpoint tells
		}, "changed, replaced or reordered"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, open, nil, audit.LogOptions{})
			a := f.appendN("acme", n)
			f.appendN("globex", 5)
			saved, cp := f.checkpoint("acme")
			if cp.Size != n {
				t.Fatalf("saved checkpoint has size %d, want %d", cp.Size, n)
			}
			if res, err := f.log.VerifyCheckpoint(f.ctx, "acme", saved); err != nil || !res.OK || res.CheckpointSize != n || res.GivenCheckpointSize != n {
				t.Fatalf("VerifyCheckpoint before tampering = %+v, %v", res, err)
			}
			tc.tamper(t, f, tamperer(t, f.store), a)
			// A gateway that restarted since, and so remembers nothing.
			fresh := f.newLog(audit.LogOptions{})
			res, err := fresh.VerifyCheckpoint(f.ctx, "acme", saved)
			if err != nil {
				t.Fatalf("VerifyCheckpoint: %v", err)
			}
			if res.OK || !strings.Contains(res.Problem, tc.want) {
				t.Fatalf("VerifyCheckpoint after tampering = %+v, want a problem with %q", res, tc.want)
			}
			// The gateway that saw the checkpoint tells without it.
			if res := f.verify("acme"); res.OK {
				t.Fatalf("Verify by the gateway that signed it = %+v, want not ok", res)
			}
			f.mustVerify("globex", 5)
		})
	}

	t.Run("an untouched log that grew since passes", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t, open, nil, audit.LogOptions{})
		f.appendN("acme", 7)
		saved, _ := f.checkpoint("acme")
		f.appendN("acme", 5)
		res, err := f.newLog(audit.LogOptions{}).VerifyCheckpoint(f.ctx, "acme", saved)
		if err != nil || !res.OK || res.EventsChecked != 12 || res.TreeSize != 12 || res.CheckpointSize < 7 || res.GivenCheckpointSize != 7 {
			t.Fatalf("VerifyCheckpoint = %+v, %v", res, err)
		}
	})
}

func testBadCheckpoint(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{})
	f.appendN("acme", 3)
	saved, _ := f.checkpoint("acme")
	other := newFixture(t, open, nil, audit.LogOptions{}) // another gateway, another key
	other.appendN("acme", 3)
	foreign, _ := other.checkpoint("acme")
	for name, note := range map[string][]byte{
		"garbage":             []byte("not a checkpoint"),
		"another key":         foreign,
		"an edited size":      []byte(strings.Replace(string(saved), "\n3\n", "\n2\n", 1)),
		"another tenant's":    []byte(strings.Replace(string(saved), "toolgate/acme", "toolgate/globex", 1)),
		"the empty note body": []byte(""),
	} {
		if _, err := f.log.VerifyCheckpoint(f.ctx, "acme", note); !errors.Is(err, audit.ErrBadCheckpoint) {
			t.Errorf("%s: VerifyCheckpoint = %v, want ErrBadCheckpoint", name, err)
		}
	}
	if _, err := f.log.VerifyCheckpoint(f.ctx, "globex", saved); !errors.Is(err, audit.ErrBadCheckpoint) || !errors.Is(err, tlog.ErrWrongOrigin) {
		t.Errorf("acme's checkpoint against globex = %v, want ErrBadCheckpoint (wrong origin)", err)
	}
}

func testRefuseToSign(t *testing.T, open func(*testing.T) audit.Store) {
	f := newFixture(t, open, nil, audit.LogOptions{CheckpointInterval: time.Nanosecond})
	a := f.appendN("acme", 6)
	_, cp := f.checkpoint("acme")
	tam := tamperer(t, f.store)
	// The attacker shrinks the stored tree to the first three events but
	// keeps the signed checkpoint of six: appends go on, checkpoints stop.
	for _, ev := range a[3:] {
		if err := tam.TamperDelete(f.ctx, ev.ID); err != nil {
			t.Fatal(err)
		}
	}
	var leaves [][]byte
	for _, ev := range a[:3] {
		b, _ := audit.HashBytes(ev.Hash)
		leaves = append(leaves, b)
	}
	integ, err := tlog.Integrate(tlog.State{}, leaves)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := integ.State.MarshalBinary()
	if err := tam.TamperTree(f.ctx, "acme", 3, st, integ.Root, integ.Nodes); err != nil {
		t.Fatal(err)
	}
	fresh := f.newLog(audit.LogOptions{CheckpointInterval: time.Nanosecond})
	for i := range 4 {
		if err := fresh.Append(f.ctx, event("acme", 10+i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := fresh.Sync(f.ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	got, err := fresh.Checkpoint(f.ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if now, _ := fresh.Verifier().Open(got, tlog.Origin("acme")); now.Size != cp.Size || string(now.Root) != string(cp.Root) {
		t.Fatalf("the gateway signed size %d over a shortened tree; want the checkpoint of size %d kept", now.Size, cp.Size)
	}
	// A gateway with another key does not sign over this key's
	// checkpoints either.
	g := newFixture(t, open, nil, audit.LogOptions{CheckpointInterval: time.Nanosecond, IntegrateInterval: time.Hour})
	g.appendN("acme", 2)
	kept, _ := g.checkpoint("acme")
	intruder := g.newLog(audit.LogOptions{Signer: newSigner(t), CheckpointInterval: time.Nanosecond})
	if err := intruder.Append(g.ctx, event("acme", 5)); err != nil {
		t.Fatal(err)
	}
	if err := intruder.Sync(g.ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	if now, _ := g.log.Checkpoint(g.ctx, "acme"); string(now) != string(kept) {
		t.Fatalf("a gateway with another key replaced the checkpoint:\n%s", now)
	}
	g.mustVerify("acme", 3)
}

func testLegacy(t *testing.T, open func(*testing.T) audit.Store) {
	// A log without an integrator of its own, so that the legacy rows are
	// put in place before anything integrates.
	f := newFixture(t, open, nil, audit.LogOptions{IntegrateInterval: time.Hour, IntegrateBatch: 1 << 20})
	tam := tamperer(t, f.store)
	mainEvs, mainRaws := legacyChain(t, "acme", "main", 0, 3)
	bEvs, bRaws := legacyChain(t, "acme", "b", 10, 2)
	for i, ev := range mainEvs {
		mustDo(t, tam.InsertLegacy(f.ctx, ev, mainRaws[i]))
	}
	for i, ev := range bEvs {
		mustDo(t, tam.InsertLegacy(f.ctx, ev, bRaws[i]))
	}
	// Before integration they are there already.
	if got, err := f.log.Get(f.ctx, "acme", mainEvs[1].ID); err != nil || got.Hash != mainEvs[1].Hash || got.LogIndex != nil {
		t.Fatalf("Get(legacy event) = %+v, %v", got, err)
	}
	fresh := f.appendN("acme", 2)
	f.mustVerify("acme", 7)
	// Chain order: "b" before "main", then what the new log wrote.
	want := []string{bEvs[0].ID, bEvs[1].ID, mainEvs[0].ID, mainEvs[1].ID, mainEvs[2].ID, fresh[0].ID, fresh[1].ID}
	for i, r := range f.rows("acme") {
		if r.ID != want[i] || r.LogIndex != int64(i) {
			t.Fatalf("row %d is %s at %d, want %s", i, r.ID, r.LogIndex, want[i])
		}
	}

	// A gap in a legacy chain (an event deleted before the upgrade) is
	// still reported.
	g := newFixture(t, open, nil, audit.LogOptions{IntegrateInterval: time.Hour, IntegrateBatch: 1 << 20})
	gt := tamperer(t, g.store)
	evs, raws := legacyChain(t, "acme", "main", 0, 4)
	for i := range evs {
		if i != 1 {
			mustDo(t, gt.InsertLegacy(g.ctx, evs[i], raws[i]))
		}
	}
	if res := g.verify("acme"); res.OK || res.FirstBadEvent != evs[2].ID || !strings.Contains(res.Problem, "hash-chain link") {
		t.Fatalf("Verify of a legacy chain with a gap = %+v, want %s reported", res, evs[2].ID)
	}
}

// mustDo fails the test when a tampering step did not apply.
func mustDo(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("tamper: %v", err)
	}
}
