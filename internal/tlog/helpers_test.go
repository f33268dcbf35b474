package tlog_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"

	"github.com/toolgate/toolgate/internal/tlog"
)

// entries returns n distinct 32-byte entries standing in for event hashes.
func entries(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		h := sha256.Sum256(fmt.Appendf(nil, "event %d", i))
		out[i] = h[:]
	}
	return out
}

// build integrates es into an empty tree in batches of batch entries and
// returns the final state and every node the integrations reported.
func build(t testing.TB, es [][]byte, batch int) (tlog.State, tlog.MemNodes) {
	t.Helper()
	var st tlog.State
	nodes := tlog.MemNodes{}
	for len(es) > 0 {
		n := min(batch, len(es))
		in, err := tlog.Integrate(st, es[:n])
		if err != nil {
			t.Fatal(err)
		}
		for _, nd := range in.Nodes {
			if _, dup := nodes[nd.ID]; dup {
				t.Fatalf("node %s reported twice", nd.ID)
			}
		}
		nodes.Put(in.Nodes)
		st = in.State
		es = es[n:]
	}
	return st, nodes
}

func root(t testing.TB, st tlog.State) []byte {
	t.Helper()
	r, err := st.Root()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// head is the unsigned checkpoint of a state.
func head(t testing.TB, st tlog.State) tlog.Checkpoint {
	return tlog.Checkpoint{Size: st.Size, Root: root(t, st)}
}

var ctx = context.Background()
