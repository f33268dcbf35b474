package tlog_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"

	"github.com/toolgate/toolgate/internal/tlog"
)

// A store integrates events, persists nodes and state, and signs a
// checkpoint; an auditor verifies an inclusion proof and, later, that the
// log only grew.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "tlog-example")
	defer os.RemoveAll(dir)

	signer, err := tlog.LoadOrCreateSigner(filepath.Join(dir, "audit-signing.key"), tlog.KeyName)
	if err != nil {
		panic(err)
	}

	// The store: a node table, the tenant's state.
	nodes := tlog.MemNodes{}
	var state tlog.State
	eventHash := func(i int) []byte {
		h := sha256.Sum256(fmt.Appendf(nil, `{"id":"event-%d"}`, i))
		return h[:]
	}
	integrate := func(from, to int) {
		var batch [][]byte
		for i := from; i < to; i++ {
			batch = append(batch, eventHash(i))
		}
		in, err := tlog.Integrate(state, batch)
		if err != nil {
			panic(err)
		}
		nodes.Put(in.Nodes)
		state = in.State // persisted with state.MarshalBinary()
	}
	checkpoint := func() []byte {
		root, _ := state.Root()
		note, err := signer.Sign(tlog.Checkpoint{Origin: tlog.Origin("acme"), Size: state.Size, Root: root})
		if err != nil {
			panic(err)
		}
		return note
	}

	integrate(0, 5)
	saved := checkpoint() // the auditor keeps this note

	// The auditor opens it with the published verifier key.
	verifier, _ := tlog.NewVerifier(signer.VerifierKey())
	cp, err := verifier.Open(saved, "toolgate/acme")
	if err != nil {
		panic(err)
	}
	fmt.Println("checkpoint size", cp.Size)

	// Event 3 is in it.
	proof, _ := tlog.ProveInclusion(ctx, nodes, 3, cp.Size)
	fmt.Println("inclusion of event 3:", tlog.VerifyInclusion(proof, eventHash(3), cp))

	// The log grows; the new tree extends the saved checkpoint.
	integrate(5, 12)
	latest, _ := verifier.Open(checkpoint(), "toolgate/acme")
	fmt.Println("consistent:", tlog.VerifyExtension(ctx, nodes, cp, latest))

	// An export of the first 4 events is a truncated log.
	export := [][]byte{eventHash(0), eventHash(1), eventHash(2), eventHash(3)}
	fmt.Println(tlog.VerifyLog(cp, export))
	// Output:
	// checkpoint size 5
	// inclusion of event 3: <nil>
	// consistent: <nil>
	// tlog: log is shorter than the checkpoint: 4 entries, checkpoint commits to 5 (1 missing)
}
