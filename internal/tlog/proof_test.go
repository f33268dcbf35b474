package tlog_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"testing"

	"github.com/toolgate/toolgate/internal/tlog"
)

func TestProofJSON(t *testing.T) {
	es := entries(5)
	st, nodes := build(t, es, 5)
	p, err := tlog.ProveInclusion(ctx, nodes, 4, 5)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(p)
	var raw map[string]any
	json.Unmarshal(b, &raw)
	hs, ok := raw["hashes"].([]any)
	if raw["index"] != 4.0 || raw["size"] != 5.0 || !ok || len(hs) != len(p.Hashes) || len(raw) != 3 {
		t.Fatalf("inclusion proof JSON %s", b)
	}
	if h, _ := base64.StdEncoding.DecodeString(hs[0].(string)); !bytes.Equal(h, p.Hashes[0]) {
		t.Fatalf("hash 0 in JSON is not standard base64 of the hash: %s", b)
	}
	var back tlog.InclusionProof
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if err := tlog.VerifyInclusion(back, es[4], head(t, st)); err != nil {
		t.Fatalf("proof read back from JSON: %v", err)
	}

	// An empty proof is [] in JSON, not null.
	one, _ := tlog.ProveInclusion(ctx, nodes, 0, 1)
	if b, _ := json.Marshal(one); string(b) != `{"index":0,"size":1,"hashes":[]}` {
		t.Fatalf("size-1 proof JSON %s", b)
	}
	c, _ := tlog.ProveConsistency(ctx, nodes, 2, 5)
	if b, _ := json.Marshal(c); !bytes.HasPrefix(b, []byte(`{"from":2,"to":5,"hashes":["`)) {
		t.Fatalf("consistency proof JSON %s", b)
	}
	c, _ = tlog.ProveConsistency(ctx, nodes, 5, 5)
	if b, _ := json.Marshal(c); string(b) != `{"from":5,"to":5,"hashes":[]}` {
		t.Fatalf("empty consistency proof JSON %s", b)
	}
}

func TestInclusionEdges(t *testing.T) {
	es := entries(1)
	st, nodes := build(t, es, 1)
	p, err := tlog.ProveInclusion(ctx, nodes, 0, 1)
	if err != nil || len(p.Hashes) != 0 {
		t.Fatalf("size 1: %v, %d hashes", err, len(p.Hashes))
	}
	if err := tlog.VerifyInclusion(p, es[0], head(t, st)); err != nil {
		t.Fatal(err)
	}
	if err := tlog.VerifyInclusion(p, entries(2)[1], head(t, st)); !errors.Is(err, tlog.ErrBadProof) {
		t.Fatalf("other entry in a size-1 tree: %v", err)
	}
	for _, c := range [][2]uint64{{1, 1}, {0, 0}, {5, 3}} {
		if _, err := tlog.ProveInclusion(ctx, nodes, c[0], c[1]); !errors.Is(err, tlog.ErrBadRange) {
			t.Errorf("ProveInclusion(%d, %d): err = %v, want ErrBadRange", c[0], c[1], err)
		}
	}
	if err := tlog.VerifyInclusion(tlog.InclusionProof{Index: 1, Size: 1}, es[0], head(t, st)); !errors.Is(err, tlog.ErrBadRange) {
		t.Errorf("index = size: err = %v, want ErrBadRange", err)
	}
	if _, err := tlog.ProveConsistency(ctx, nodes, 2, 1); !errors.Is(err, tlog.ErrBadRange) {
		t.Errorf("ProveConsistency(2, 1): err = %v, want ErrBadRange", err)
	}
}

func TestProofForALargerTreeThanStoredFails(t *testing.T) {
	_, nodes := build(t, entries(10), 10)
	if _, err := tlog.ProveInclusion(ctx, nodes, 3, 11); !errors.Is(err, tlog.ErrNodeNotFound) {
		t.Fatalf("inclusion beyond the tree: err = %v, want ErrNodeNotFound", err)
	}
	if _, err := tlog.ProveConsistency(ctx, nodes, 3, 12); !errors.Is(err, tlog.ErrNodeNotFound) {
		t.Fatalf("consistency beyond the tree: err = %v, want ErrNodeNotFound", err)
	}
}

func TestConsistencyFromEmpty(t *testing.T) {
	es := entries(6)
	st, nodes := build(t, es, 6)
	p, err := tlog.ProveConsistency(ctx, nodes, 0, 6)
	if err != nil || len(p.Hashes) != 0 {
		t.Fatalf("from 0: %v, %d hashes", err, len(p.Hashes))
	}
	empty := tlog.Checkpoint{Size: 0, Root: tlog.EmptyRoot()}
	if err := tlog.VerifyConsistency(p, empty, head(t, st)); err != nil {
		t.Fatal(err)
	}
	bogus := tlog.Checkpoint{Size: 0, Root: head(t, st).Root}
	if err := tlog.VerifyConsistency(p, bogus, head(t, st)); !errors.Is(err, tlog.ErrBadProof) {
		t.Fatalf("size 0 with a non-empty root: err = %v, want ErrBadProof", err)
	}
}

func TestTamperedProofsFail(t *testing.T) {
	es := entries(21)
	st, nodes := build(t, es, 4)
	cp := head(t, st)
	for _, i := range []uint64{0, 7, 16, 19, 20} {
		p, _ := tlog.ProveInclusion(ctx, nodes, i, 21)
		if err := tlog.VerifyInclusion(p, es[i], cp); err != nil {
			t.Fatal(err)
		}
		for k := range p.Hashes {
			bad := clone(p)
			bad.Hashes[k][k%32] ^= 0x80
			if err := tlog.VerifyInclusion(bad, es[i], cp); !errors.Is(err, tlog.ErrBadProof) {
				t.Errorf("index %d, hash %d flipped: err = %v", i, k, err)
			}
		}
		short := clone(p)
		short.Hashes = short.Hashes[:len(short.Hashes)-1]
		long := clone(p)
		long.Hashes = append(long.Hashes, make([]byte, 32))
		otherSize := clone(p)
		otherSize.Size = 20
		for name, bad := range map[string]tlog.InclusionProof{"short": short, "long": long, "size 20 against checkpoint 21": otherSize} {
			if err := tlog.VerifyInclusion(bad, es[i], cp); !errors.Is(err, tlog.ErrBadProof) {
				t.Errorf("index %d, %s: err = %v", i, name, err)
			}
		}
	}
	// A consistency proof with a flipped hash, or for other sizes.
	mid, _ := build(t, es[:13], 13)
	c, _ := tlog.ProveConsistency(ctx, nodes, 13, 21)
	if err := tlog.VerifyConsistency(c, head(t, mid), cp); err != nil {
		t.Fatal(err)
	}
	for k := range c.Hashes {
		bad := tlog.ConsistencyProof{From: c.From, To: c.To, Hashes: cloneHashes(c.Hashes)}
		bad.Hashes[k][0] ^= 1
		if err := tlog.VerifyConsistency(bad, head(t, mid), cp); !errors.Is(err, tlog.ErrBadProof) {
			t.Errorf("consistency hash %d flipped: err = %v", k, err)
		}
	}
	relabelled := c
	relabelled.From = 12
	if err := tlog.VerifyConsistency(relabelled, head(t, mid), cp); !errors.Is(err, tlog.ErrBadProof) {
		t.Errorf("proof relabelled to size 12: err = %v", err)
	}
}

func TestProvingLeavesTheStoreAlone(t *testing.T) {
	_, nodes := build(t, entries(300), 300)
	before := map[tlog.NodeID]string{}
	for id, h := range nodes {
		before[id] = string(h)
	}
	for n := uint64(1); n <= 300; n += 7 {
		for i := uint64(0); i < n; i += 5 {
			tlog.ProveInclusion(ctx, nodes, i, n)
		}
		tlog.ProveConsistency(ctx, nodes, n/3, n)
	}
	for id, h := range nodes {
		if before[id] != string(h) {
			t.Fatalf("node %s changed while proving", id)
		}
	}
}

// badReader answers with too few hashes, or short ones.
type badReader struct {
	inner tlog.NodeReader
	mode  string
}

func (b badReader) Nodes(ctx context.Context, ids []tlog.NodeID) ([][]byte, error) {
	hs, err := b.inner.Nodes(ctx, ids)
	if err != nil {
		return nil, err
	}
	switch b.mode {
	case "few":
		return hs[:len(hs)-1], nil
	case "short":
		hs[0] = hs[0][:31]
	}
	return hs, nil
}

func TestMisbehavingReaders(t *testing.T) {
	_, nodes := build(t, entries(11), 11)
	for _, mode := range []string{"few", "short"} {
		r := badReader{inner: nodes, mode: mode}
		if _, err := tlog.ProveInclusion(ctx, r, 3, 11); err == nil {
			t.Errorf("%s: inclusion proof built", mode)
		}
		if _, err := tlog.ProveConsistency(ctx, r, 3, 11); err == nil {
			t.Errorf("%s: consistency proof built", mode)
		}
	}
	// A reader's error comes through, context errors included.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	r := ctxReader{nodes}
	if _, err := tlog.ProveInclusion(cctx, r, 3, 11); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: err = %v", err)
	}
}

type ctxReader struct{ tlog.MemNodes }

func (c ctxReader) Nodes(ctx context.Context, ids []tlog.NodeID) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return c.MemNodes.Nodes(ctx, ids)
}

func clone(p tlog.InclusionProof) tlog.InclusionProof {
	p.Hashes = cloneHashes(p.Hashes)
	return p
}

func cloneHashes(hs [][]byte) [][]byte {
	out := make([][]byte, len(hs))
	for i, h := range hs {
		out[i] = bytes.Clone(h)
	}
	return out
}

func TestStateAtRebuildsTheStateFromNodes(t *testing.T) {
	es := entries(300)
	_, nodes := build(t, es, 300)
	for _, n := range []uint64{0, 1, 2, 3, 7, 8, 100, 255, 256, 299, 300} {
		want, _ := build(t, es[:n], 13)
		got, err := tlog.StateAt(ctx, nodes, n)
		if err != nil {
			t.Fatalf("size %d: %v", n, err)
		}
		a, _ := got.MarshalBinary()
		b, _ := want.MarshalBinary()
		if !bytes.Equal(a, b) {
			t.Fatalf("size %d: state from nodes differs from the integrated one", n)
		}
	}
	if _, err := tlog.StateAt(ctx, nodes, 301); !errors.Is(err, tlog.ErrNodeNotFound) {
		t.Fatalf("size beyond the tree: err = %v", err)
	}
	if _, err := tlog.StateAt(ctx, badReader{inner: nodes, mode: "short"}, 7); !errors.Is(err, tlog.ErrBadState) {
		t.Fatalf("short hash: err = %v, want ErrBadState", err)
	}
}
