package tlog_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"testing"

	"github.com/toolgate/toolgate/internal/tlog"
)

func TestEmptyTree(t *testing.T) {
	empty := sha256.Sum256(nil)
	r, err := tlog.State{}.Root()
	if err != nil || !bytes.Equal(r, empty[:]) {
		t.Fatalf("empty root = %x, %v; want SHA-256 of nothing", r, err)
	}
	in, err := tlog.Integrate(tlog.State{}, nil)
	if err != nil || in.State.Size != 0 || len(in.Nodes) != 0 || !bytes.Equal(in.Root, empty[:]) {
		t.Fatalf("empty batch on empty tree = %+v, %v", in, err)
	}
}

func TestSingleLeafRootIsItsLeafHash(t *testing.T) {
	e := entries(1)
	in, err := tlog.Integrate(tlog.State{}, e)
	if err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256(append([]byte{0}, e[0]...))
	if !bytes.Equal(in.Root, want[:]) {
		t.Fatalf("root of one entry = %x, want SHA-256(0x00||entry) = %x", in.Root, want)
	}
	if len(in.Nodes) != 1 || in.Nodes[0].ID != (tlog.NodeID{Level: 0, Index: 0}) || !bytes.Equal(in.Nodes[0].Hash, want[:]) {
		t.Fatalf("nodes = %+v, want only leaf 0/0", in.Nodes)
	}
}

func TestBatchingDoesNotChangeTheTree(t *testing.T) {
	es := entries(300)
	want, wantNodes := build(t, es, len(es))
	for _, batch := range []int{1, 2, 3, 7, 64, 100, 299} {
		got, gotNodes := build(t, es, batch)
		if !bytes.Equal(root(t, got), root(t, want)) || got.Size != want.Size {
			t.Fatalf("batch %d: size %d root %x, want %d %x", batch, got.Size, root(t, got), want.Size, root(t, want))
		}
		if len(gotNodes) != len(wantNodes) {
			t.Fatalf("batch %d: %d nodes, want %d", batch, len(gotNodes), len(wantNodes))
		}
		for id, h := range wantNodes {
			if !bytes.Equal(gotNodes[id], h) {
				t.Fatalf("batch %d: node %s differs", batch, id)
			}
		}
	}
}

func TestRootOfMatchesIntegrate(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 5, 8, 13, 1000} {
		es := entries(n)
		st, _ := build(t, es, 10)
		r, err := tlog.RootOf(es)
		if err != nil || !bytes.Equal(r, root(t, st)) {
			t.Fatalf("n=%d: RootOf = %x, %v; want %x", n, r, err, root(t, st))
		}
	}
}

func TestIntegrateLeavesPreviousStateAlone(t *testing.T) {
	// Size 7 has three compact hashes; appending merges them in place
	// inside the library, which must not reach the caller's slice.
	st, _ := build(t, entries(7), 7)
	saved, _ := st.MarshalBinary()
	for range 3 {
		if _, err := tlog.Integrate(st, entries(9)); err != nil {
			t.Fatal(err)
		}
	}
	again, _ := st.MarshalBinary()
	if !bytes.Equal(saved, again) {
		t.Fatal("Integrate modified the previous state")
	}
}

func TestStateRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 2, 7, 8, 255, 256, 1023} {
		st, _ := build(t, entries(n), 50)
		b, err := st.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var back tlog.State
		if err := back.UnmarshalBinary(b); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		if back.Size != st.Size || !bytes.Equal(root(t, back), root(t, st)) {
			t.Fatalf("n=%d: round trip changed the state", n)
		}
		// Appending to the decoded state continues the same tree.
		more := entries(n + 5)[n:]
		a, err := tlog.Integrate(back, more)
		if err != nil {
			t.Fatal(err)
		}
		whole, _ := build(t, entries(n+5), n+5)
		if !bytes.Equal(a.Root, root(t, whole)) {
			t.Fatalf("n=%d: tree continued from a decoded state differs", n)
		}
	}
}

func TestBadStateIsRejected(t *testing.T) {
	st, _ := build(t, entries(7), 7)
	good, _ := st.MarshalBinary()
	cases := map[string][]byte{
		"empty":           nil,
		"version 2":       append([]byte{2}, good[1:]...),
		"hash missing":    good[:len(good)-32],
		"hash extra":      append(append([]byte(nil), good...), make([]byte, 32)...),
		"hash cut short":  good[:len(good)-1],
		"size disagrees":  append(append([]byte{1}, 0, 0, 0, 0, 0, 0, 0, 8), good[9:]...),
		"no size at all":  {1, 0, 0},
		"trailing garble": append(append([]byte(nil), good...), 0xff),
	}
	for name, b := range cases {
		var s tlog.State
		if err := s.UnmarshalBinary(b); !errors.Is(err, tlog.ErrBadState) {
			t.Errorf("%s: err = %v, want ErrBadState", name, err)
		}
	}
	bad := []tlog.State{
		{Size: 3, Hashes: st.Hashes[:1]},
		{Size: 1, Hashes: [][]byte{make([]byte, 31)}},
		{Size: 0, Hashes: st.Hashes[:1]},
	}
	for _, s := range bad {
		if _, err := tlog.Integrate(s, entries(1)); !errors.Is(err, tlog.ErrBadState) {
			t.Errorf("Integrate(size %d, %d hashes): err = %v, want ErrBadState", s.Size, len(s.Hashes), err)
		}
		if _, err := s.Root(); !errors.Is(err, tlog.ErrBadState) {
			t.Errorf("Root(size %d, %d hashes): err = %v, want ErrBadState", s.Size, len(s.Hashes), err)
		}
	}
}

func TestEntriesMustBe32Bytes(t *testing.T) {
	for _, e := range [][]byte{nil, make([]byte, 31), make([]byte, 33)} {
		if _, err := tlog.Integrate(tlog.State{}, [][]byte{e}); !errors.Is(err, tlog.ErrBadEntry) {
			t.Errorf("%d-byte entry: err = %v, want ErrBadEntry", len(e), err)
		}
		if _, err := tlog.RootOf([][]byte{e}); !errors.Is(err, tlog.ErrBadEntry) {
			t.Errorf("RootOf %d-byte entry: err = %v, want ErrBadEntry", len(e), err)
		}
	}
	// A 64-character hex hash is 64 bytes, not 32: the contract is raw bytes.
	hexHash := []byte("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
	if _, err := tlog.Integrate(tlog.State{}, [][]byte{hexHash}); !errors.Is(err, tlog.ErrBadEntry) {
		t.Errorf("hex-encoded entry accepted: %v", err)
	}
}
