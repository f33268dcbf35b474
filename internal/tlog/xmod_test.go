package tlog_test

// Cross-checks against an independent RFC 6962 implementation,
// golang.org/x/mod/sumdb/tlog (the Go checksum database's): roots, stored
// nodes and proofs computed by one are checked by the other.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/toolgate/toolgate/internal/tlog"
)

// xtree is an x/mod tlog tree: its stored hashes in StoredHashIndex order.
type xtree []xtlog.Hash

func (x xtree) ReadHashes(idx []int64) ([]xtlog.Hash, error) {
	out := make([]xtlog.Hash, len(idx))
	for i, j := range idx {
		if j < 0 || j >= int64(len(x)) {
			return nil, fmt.Errorf("no stored hash %d", j)
		}
		out[i] = x[j]
	}
	return out, nil
}

func buildX(t testing.TB, es [][]byte) xtree {
	t.Helper()
	var x xtree
	for i, e := range es {
		hs, err := xtlog.StoredHashes(int64(i), e, x)
		if err != nil {
			t.Fatal(err)
		}
		x = append(x, hs...)
	}
	return x
}

func xroot(t testing.TB, x xtree, n uint64) xtlog.Hash {
	t.Helper()
	h, err := xtlog.TreeHash(int64(n), x)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func toX(hs [][]byte) []xtlog.Hash {
	out := make([]xtlog.Hash, len(hs))
	for i, h := range hs {
		copy(out[i][:], h)
	}
	return out
}

func fromX(hs []xtlog.Hash) [][]byte {
	out := make([][]byte, len(hs))
	for i := range hs {
		out[i] = hs[i][:]
	}
	return out
}

// sizes returns the tree sizes to test: 1..maxSmall, and every power of two
// up to limit, with its neighbours.
func sizes(maxSmall, limit uint64) []uint64 {
	var out []uint64
	for n := uint64(1); n <= maxSmall; n++ {
		out = append(out, n)
	}
	for p := uint64(1); p <= limit; p *= 2 {
		for _, n := range []uint64{p - 1, p, p + 1} {
			if n > maxSmall && n >= 1 && n <= limit {
				out = append(out, n)
			}
		}
	}
	return out
}

// indexes returns the leaf indexes to test in a tree of size n: all of them
// for small trees, else the edges and a few inside.
func indexes(n uint64, rnd *rand.Rand) []uint64 {
	if n <= 40 {
		out := make([]uint64, n)
		for i := range out {
			out[i] = uint64(i)
		}
		return out
	}
	out := []uint64{0, 1, n / 2, n - 2, n - 1, rnd.Uint64N(n), rnd.Uint64N(n)}
	for p := uint64(1); p < n; p *= 2 {
		out = append(out, p-1, p)
	}
	return out
}

const crossLimit = 4100 // past 2^12 + 1

func TestRootsAndNodesMatchXModTlog(t *testing.T) {
	es := entries(crossLimit)
	x := buildX(t, es)
	var st tlog.State
	stored := 0
	for n := uint64(1); n <= crossLimit; n++ {
		in, err := tlog.Integrate(st, es[n-1:n])
		if err != nil {
			t.Fatal(err)
		}
		st = in.State
		if want := xroot(t, x, n); !bytes.Equal(in.Root, want[:]) {
			t.Fatalf("size %d: root %x, x/mod tlog says %x", n, in.Root, want)
		}
		// Every node we report is the node x/mod stores at the same
		// (level, index), and we report exactly as many.
		for _, nd := range in.Nodes {
			xi := xtlog.StoredHashIndex(int(nd.ID.Level), int64(nd.ID.Index))
			if !bytes.Equal(nd.Hash, x[xi][:]) {
				t.Fatalf("size %d: node %s differs from x/mod tlog's", n, nd.ID)
			}
		}
		stored += len(in.Nodes)
		if want := xtlog.StoredHashCount(int64(n)); int64(stored) != want {
			t.Fatalf("size %d: %d nodes stored, x/mod tlog stores %d", n, stored, want)
		}
	}
}

func TestInclusionProofsMatchXModTlog(t *testing.T) {
	es := entries(crossLimit)
	x := buildX(t, es)
	// One store holding the largest tree answers proofs for every smaller
	// size, as a store of a growing log must.
	_, nodes := build(t, es, 1000)
	rnd := rand.New(rand.NewPCG(1, 2))
	checked := 0
	for _, n := range sizes(70, crossLimit) {
		xr := xroot(t, x, n)
		cp := tlog.Checkpoint{Size: n, Root: xr[:]}
		for _, i := range indexes(n, rnd) {
			ours, err := tlog.ProveInclusion(ctx, nodes, i, n)
			if err != nil {
				t.Fatalf("ProveInclusion(%d, %d): %v", i, n, err)
			}
			// Ours, checked by x/mod.
			leaf := xtlog.RecordHash(es[i])
			if err := xtlog.CheckRecord(toX(ours.Hashes), int64(n), xr, int64(i), leaf); err != nil {
				t.Fatalf("x/mod rejects our inclusion proof (%d, %d): %v", i, n, err)
			}
			// Theirs, checked by ours.
			theirs, err := xtlog.ProveRecord(int64(n), int64(i), x)
			if err != nil {
				t.Fatal(err)
			}
			p := tlog.InclusionProof{Index: i, Size: n, Hashes: fromX(theirs)}
			if err := tlog.VerifyInclusion(p, es[i], cp); err != nil {
				t.Fatalf("we reject x/mod's inclusion proof (%d, %d): %v", i, n, err)
			}
			// And the two are the same list (RFC 6962 audit path order).
			if len(theirs) != len(ours.Hashes) {
				t.Fatalf("(%d, %d): %d hashes, x/mod has %d", i, n, len(ours.Hashes), len(theirs))
			}
			for k := range theirs {
				if !bytes.Equal(ours.Hashes[k], theirs[k][:]) {
					t.Fatalf("(%d, %d): hash %d differs from x/mod's", i, n, k)
				}
			}
			// A proof for another entry, index or size does not verify.
			other := (i + 1) % n
			if n > 1 {
				if err := tlog.VerifyInclusion(ours, es[other], cp); err == nil {
					t.Fatalf("(%d, %d): proof verifies entry %d", i, n, other)
				}
				moved := ours
				moved.Index = other
				if err := tlog.VerifyInclusion(moved, es[i], cp); err == nil {
					t.Fatalf("(%d, %d): proof verifies at index %d", i, n, other)
				}
			}
			checked++
		}
	}
	t.Logf("%d (index, size) pairs", checked)
}

func TestConsistencyProofsMatchXModTlog(t *testing.T) {
	es := entries(crossLimit)
	x := buildX(t, es)
	_, nodes := build(t, es, 777)
	rnd := rand.New(rand.NewPCG(3, 4))
	pairs := [][2]uint64{}
	for n := uint64(1); n <= 40; n++ {
		for m := uint64(1); m <= n; m++ {
			pairs = append(pairs, [2]uint64{m, n})
		}
	}
	for _, n := range sizes(0, crossLimit) {
		for _, m := range []uint64{1, 2, n / 2, n - 1, n, rnd.Uint64N(n) + 1} {
			if m >= 1 && m <= n {
				pairs = append(pairs, [2]uint64{m, n})
			}
		}
		for _, m := range sizes(0, n) {
			pairs = append(pairs, [2]uint64{m, n})
		}
	}
	for _, pr := range pairs {
		m, n := pr[0], pr[1]
		rm, rn := xroot(t, x, m), xroot(t, x, n)
		from, to := tlog.Checkpoint{Size: m, Root: rm[:]}, tlog.Checkpoint{Size: n, Root: rn[:]}
		ours, err := tlog.ProveConsistency(ctx, nodes, m, n)
		if err != nil {
			t.Fatalf("ProveConsistency(%d, %d): %v", m, n, err)
		}
		if err := xtlog.CheckTree(toX(ours.Hashes), int64(n), rn, int64(m), rm); err != nil {
			t.Fatalf("x/mod rejects our consistency proof (%d, %d): %v", m, n, err)
		}
		theirs, err := xtlog.ProveTree(int64(n), int64(m), x)
		if err != nil {
			t.Fatal(err)
		}
		p := tlog.ConsistencyProof{From: m, To: n, Hashes: fromX(theirs)}
		if err := tlog.VerifyConsistency(p, from, to); err != nil {
			t.Fatalf("we reject x/mod's consistency proof (%d, %d): %v", m, n, err)
		}
		if len(theirs) != len(ours.Hashes) {
			t.Fatalf("(%d, %d): %d hashes, x/mod has %d", m, n, len(ours.Hashes), len(theirs))
		}
		for k := range theirs {
			if !bytes.Equal(ours.Hashes[k], theirs[k][:]) {
				t.Fatalf("(%d, %d): hash %d differs from x/mod's", m, n, k)
			}
		}
		if m < n {
			// Against another old root it fails.
			wrong := tlog.Checkpoint{Size: m, Root: rn[:]}
			if err := tlog.VerifyConsistency(ours, wrong, to); err == nil {
				t.Fatalf("(%d, %d): proof ties the wrong old root", m, n)
			}
		}
	}
	t.Logf("%d (from, to) pairs", len(pairs))
}
