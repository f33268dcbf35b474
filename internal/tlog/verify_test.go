package tlog_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/tlog"
)

// The attacker in these tests can write anything to the database (events,
// tree nodes, tree state, stored checkpoints) but does not hold the
// signing key. The auditor saved a signed checkpoint of size 100 earlier
// and has the verifier key.

const savedSize = 100

type auditor struct {
	verifier *tlog.Verifier
	note     []byte // the checkpoint the auditor kept
}

func (a auditor) saved(t *testing.T) tlog.Checkpoint {
	t.Helper()
	cp, err := a.verifier.Open(a.note, "toolgate/acme")
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// setup returns the honest log of size 100 and an auditor holding its
// signed checkpoint.
func setup(t *testing.T) ([][]byte, *tlog.Signer, auditor) {
	t.Helper()
	es := entries(savedSize)
	st, _ := build(t, es, 30)
	s, _ := newSigner(t)
	msg, err := s.Sign(tlog.Checkpoint{Origin: tlog.Origin("acme"), Size: st.Size, Root: root(t, st)})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := tlog.NewVerifier(s.VerifierKey())
	return es, s, auditor{verifier: v, note: msg}
}

func fakeEntry(s string) []byte {
	h := sha256.Sum256([]byte("forged " + s))
	return h[:]
}

func TestExportMustBeExactlyTheCheckpointedLog(t *testing.T) {
	es, _, a := setup(t)
	cp := a.saved(t)
	if err := tlog.VerifyLog(cp, es); err != nil {
		t.Fatalf("the honest export fails: %v", err)
	}

	withLast := func(k int, repl ...[]byte) [][]byte {
		return append(slices.Clone(es[:len(es)-k]), repl...)
	}
	swapped := slices.Clone(es)
	swapped[40], swapped[41] = swapped[41], swapped[40]
	movedToEnd := append(append(slices.Clone(es[:10]), es[11:]...), es[10])
	middleDeleted := append(slices.Clone(es[:50]), es[51:]...)
	middleReplaced := slices.Clone(es)
	middleReplaced[50] = fakeEntry("50")
	deletedAndPadded := append(slices.Clone(middleDeleted), fakeEntry("pad"))
	inserted := append(append(slices.Clone(es[:20]), fakeEntry("in")), es[20:99]...)
	duplicated := append(slices.Clone(es[:99]), es[98])

	cases := []struct {
		name    string
		entries [][]byte
		want    error
		detail  string
	}{
		{"last event deleted", withLast(1), tlog.ErrTruncated, "99 entries, checkpoint commits to 100 (1 missing)"},
		{"last 49 events deleted", withLast(49), tlog.ErrTruncated, "(49 missing)"},
		{"whole log deleted", nil, tlog.ErrTruncated, "0 entries"},
		{"a middle event deleted", middleDeleted, tlog.ErrTruncated, "1 missing"},
		{"last event rewritten (hash recomputed)", withLast(1, fakeEntry("last")), tlog.ErrRootMismatch, "the first 100 entries hash to"},
		{"suffix of 30 rewritten", withLast(30, entries(130)[100:]...), tlog.ErrRootMismatch, ""},
		{"a middle event rewritten", middleReplaced, tlog.ErrRootMismatch, ""},
		{"a middle event deleted, a forged one appended", deletedAndPadded, tlog.ErrRootMismatch, ""},
		{"two events swapped", swapped, tlog.ErrRootMismatch, ""},
		{"an event moved to the end", movedToEnd, tlog.ErrRootMismatch, ""},
		{"an event inserted, the last dropped", inserted, tlog.ErrRootMismatch, ""},
		{"last event replaced by a copy of another", duplicated, tlog.ErrRootMismatch, ""},
		{"honest log plus later events", append(slices.Clone(es), entries(105)[100:]...), tlog.ErrUncovered, "105 entries, checkpoint commits to the first 100"},
		{"forged events appended", append(slices.Clone(es), fakeEntry("x")), tlog.ErrUncovered, ""},
		{"rewritten and grown", append(slices.Clone(middleReplaced), fakeEntry("x")), tlog.ErrRootMismatch, ""},
	}
	for _, c := range cases {
		err := tlog.VerifyLog(cp, c.entries)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.detail) {
			t.Errorf("%s: error %q does not say %q", c.name, err, c.detail)
		}
	}
}

func TestTamperedLogWithItsOwnCheckpoint(t *testing.T) {
	es, real, a := setup(t)
	// The attacker rewrites event 10 and signs a checkpoint for the
	// rewritten log with a key of their own, named like ours.
	forged := slices.Clone(es)
	forged[10] = fakeEntry("10")
	fst, _ := build(t, forged, 100)
	attacker, _ := newSigner(t)
	msg, _ := attacker.Sign(tlog.Checkpoint{Origin: "toolgate/acme", Size: 100, Root: root(t, fst)})
	if _, err := a.verifier.Open(msg, "toolgate/acme"); !errors.Is(err, tlog.ErrUnknownKey) {
		t.Fatalf("attacker's checkpoint: err = %v, want ErrUnknownKey", err)
	}
	// Or presents another tenant's genuine checkpoint (signed by our key)
	// for a log built to match it.
	other := entries(100)[50:]
	ost, _ := build(t, other, 50)
	otherNote, _ := real.Sign(tlog.Checkpoint{Origin: tlog.Origin("other"), Size: ost.Size, Root: root(t, ost)})
	if _, err := a.verifier.Open(otherNote, "toolgate/acme"); !errors.Is(err, tlog.ErrWrongOrigin) {
		t.Fatalf("another tenant's checkpoint: err = %v, want ErrWrongOrigin", err)
	}
	// With the auditor's own saved checkpoint the forged log fails.
	if err := tlog.VerifyLog(a.saved(t), forged); !errors.Is(err, tlog.ErrRootMismatch) {
		t.Fatalf("forged log against the saved checkpoint: %v", err)
	}
}

func TestCurrentTreeMustExtendTheSavedCheckpoint(t *testing.T) {
	es, _, a := setup(t)
	saved := a.saved(t)

	grown := append(slices.Clone(es), entries(180)[100:]...)
	gst, gnodes := build(t, grown, 64)
	if err := tlog.VerifyExtension(ctx, gnodes, saved, head(t, gst)); err != nil {
		t.Fatalf("honest growth: %v", err)
	}
	// The store's own tree of exactly the saved size.
	sst, snodes := build(t, es, 7)
	if err := tlog.VerifyExtension(ctx, snodes, saved, head(t, sst)); err != nil {
		t.Fatalf("same size, same root: %v", err)
	}

	// A database backup restored: a smaller tree presented as current,
	// with all its nodes intact and even its own genuine old checkpoint.
	old, onodes := build(t, es[:60], 60)
	if err := tlog.VerifyExtension(ctx, onodes, saved, head(t, old)); !errors.Is(err, tlog.ErrRolledBack) {
		t.Fatalf("rolled back to 60: err = %v, want ErrRolledBack", err)
	}
	if err := tlog.VerifyExtension(ctx, tlog.MemNodes{}, saved, tlog.Checkpoint{Size: 0, Root: tlog.EmptyRoot()}); !errors.Is(err, tlog.ErrRolledBack) {
		t.Fatalf("rolled back to empty: err = %v, want ErrRolledBack", err)
	}

	// History rewritten below the saved size and the tree rebuilt from it:
	// every node is self-consistent, but no proof ties it to the saved root.
	for _, at := range []int{0, 10, 63, 64, 99} {
		rewritten := slices.Clone(grown)
		rewritten[at] = fakeEntry("rewrite")
		rst, rnodes := build(t, rewritten, 50)
		err := tlog.VerifyExtension(ctx, rnodes, saved, head(t, rst))
		if !errors.Is(err, tlog.ErrInconsistent) {
			t.Errorf("entry %d rewritten, tree rebuilt: err = %v, want ErrInconsistent", at, err)
		}
		// Mixing: the honest nodes, the rewritten root.
		if err := tlog.VerifyExtension(ctx, gnodes, saved, head(t, rst)); !errors.Is(err, tlog.ErrInconsistent) {
			t.Errorf("entry %d rewritten, honest nodes: err = %v, want ErrInconsistent", at, err)
		}
	}
	// Same size, another root.
	same := slices.Clone(es)
	same[99] = fakeEntry("99")
	fst, fnodes := build(t, same, 100)
	if err := tlog.VerifyExtension(ctx, fnodes, saved, head(t, fst)); !errors.Is(err, tlog.ErrInconsistent) {
		t.Fatalf("same size, other root: err = %v, want ErrInconsistent", err)
	}

	// Tree nodes edited or deleted in the store.
	edited := tlog.MemNodes{}
	for id, h := range gnodes {
		edited[id] = h
	}
	p, _ := tlog.ProveConsistency(ctx, gnodes, savedSize, gst.Size)
	if len(p.Hashes) == 0 {
		t.Fatal("empty proof")
	}
	for id, h := range edited {
		if bytes.Equal(h, p.Hashes[0]) {
			edited[id] = fakeEntry("node")
		}
	}
	if err := tlog.VerifyExtension(ctx, edited, saved, head(t, gst)); !errors.Is(err, tlog.ErrInconsistent) {
		t.Fatalf("a proof node edited: err = %v, want ErrInconsistent", err)
	}
	if err := tlog.VerifyExtension(ctx, tlog.MemNodes{}, saved, head(t, gst)); !errors.Is(err, tlog.ErrNodeNotFound) {
		t.Fatalf("nodes deleted: err = %v, want ErrNodeNotFound", err)
	}

	// Origins that differ.
	cur := head(t, gst)
	cur.Origin = "toolgate/other"
	if err := tlog.VerifyExtension(ctx, gnodes, saved, cur); !errors.Is(err, tlog.ErrWrongOrigin) {
		t.Fatalf("other origin: err = %v, want ErrWrongOrigin", err)
	}
}

// TestExtensionAloneDoesNotVouchForEvents shows why an online check needs
// both steps: a consistent tree says nothing about events the store holds
// beside it; recomputing the root from the events does.
func TestExtensionAloneDoesNotVouchForEvents(t *testing.T) {
	es, _, a := setup(t)
	grown := append(slices.Clone(es), entries(120)[100:]...)
	gst, gnodes := build(t, grown, 64)
	cur := head(t, gst)
	if err := tlog.VerifyExtension(ctx, gnodes, a.saved(t), cur); err != nil {
		t.Fatal(err)
	}
	events := slices.Clone(grown)
	events[110] = fakeEntry("edited after integration")
	if err := tlog.VerifyLog(cur, events); !errors.Is(err, tlog.ErrRootMismatch) {
		t.Fatalf("edited event against the current root: err = %v", err)
	}
	if err := tlog.VerifyLog(cur, grown); err != nil {
		t.Fatal(err)
	}
}
