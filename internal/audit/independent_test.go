package audit_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	xtlog "golang.org/x/mod/sumdb/tlog"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/tlog"
)

// What an auditor with nothing but standard tools can check, done with an
// implementation independent of the one that wrote the log: the Go
// checksum database's golang.org/x/mod/sumdb/note (signed notes) and
// golang.org/x/mod/sumdb/tlog (RFC 6962 proofs), and a hand-parsed
// checkpoint body. The log uses transparency-dev/merkle and formats.
func TestCheckpointsAndProofsVerifyIndependently(t *testing.T) {
	ctx := t.Context()
	s := openSQLite(t, filepath.Join(t.TempDir(), "audit.db"))
	key, err := tlog.LoadOrCreateSigner(filepath.Join(t.TempDir(), "audit-signing.key"), tlog.KeyName)
	if err != nil {
		t.Fatal(err)
	}
	l, err := audit.NewLog(s, audit.LogOptions{Signer: key, CheckpointInterval: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	// open checks a checkpoint note with x/mod's note package and parses
	// its body by hand: origin, decimal size, base64 root.
	verifier, err := note.NewVerifier(l.VerifierKey())
	if err != nil {
		t.Fatal(err)
	}
	open := func(msg []byte) (int64, xtlog.Hash) {
		t.Helper()
		n, err := note.Open(msg, note.VerifierList(verifier))
		if err != nil {
			t.Fatalf("note.Open: %v\n%s", err, msg)
		}
		lines := strings.Split(n.Text, "\n")
		if len(lines) != 4 || lines[0] != "toolgate/acme" || lines[3] != "" {
			t.Fatalf("checkpoint body %q", n.Text)
		}
		size, err := strconv.ParseInt(lines[1], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := base64.StdEncoding.DecodeString(lines[2])
		if err != nil || len(raw) != 32 {
			t.Fatalf("root %q", lines[2])
		}
		var root xtlog.Hash
		copy(root[:], raw)
		return size, root
	}

	var evs []*audit.Event
	var sizes []int64
	var roots []xtlog.Hash
	for round := range 3 {
		for i := range 5 + 6*round { // trees of 5, 16 and 33 events
			ev := &audit.Event{Tenant: "acme", Principal: "alice", Tool: "read-file", Phase: audit.PhaseDecision,
				Outcome: "allow", CallID: "c-" + strconv.Itoa(len(evs)+i)}
			if err := l.Append(ctx, ev); err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
		}
		if err := l.Sync(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		msg, err := l.Checkpoint(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		size, root := open(msg)
		if size != int64(len(evs)) {
			t.Fatalf("checkpoint of %d events, want %d", size, len(evs))
		}
		sizes, roots = append(sizes, size), append(roots, root)
	}

	for i, ev := range evs {
		// The leaf: the 32 bytes of the event's SHA-256 hash, recomputed
		// from the event as the API returns it.
		got, err := l.Get(ctx, "acme", ev.ID)
		if err != nil || got.LogIndex == nil || *got.LogIndex != int64(i) {
			t.Fatalf("event %d: %v, log_index %v", i, err, got.LogIndex)
		}
		entry, err := audit.HashBytes(got.Hash)
		if err != nil {
			t.Fatal(err)
		}
		for k, size := range sizes {
			if int64(i) >= size {
				continue
			}
			p, err := l.InclusionProof(ctx, "acme", ev.ID, size)
			if err != nil {
				t.Fatal(err)
			}
			if err := xtlog.CheckRecord(toXProof(p.Hashes), size, roots[k], int64(i), xtlog.RecordHash(entry)); err != nil {
				t.Fatalf("x/mod tlog rejects the inclusion of event %d in the tree of %d: %v", i, size, err)
			}
		}
	}
	for a := range sizes {
		for b := a + 1; b < len(sizes); b++ {
			p, err := l.ConsistencyProof(ctx, "acme", sizes[a], sizes[b])
			if err != nil {
				t.Fatal(err)
			}
			if err := xtlog.CheckTree(toXProof(p.Hashes), sizes[b], roots[b], sizes[a], roots[a]); err != nil {
				t.Fatalf("x/mod tlog rejects the consistency of %d and %d: %v", sizes[a], sizes[b], err)
			}
		}
	}
}

func toXProof(hs [][]byte) []xtlog.Hash {
	out := make([]xtlog.Hash, len(hs))
	for i, h := range hs {
		copy(out[i][:], h)
	}
	return out
}

func TestCheckpointFileGetsEverySignedCheckpoint(t *testing.T) {
	ctx := t.Context()
	s := openSQLite(t, filepath.Join(t.TempDir(), "audit.db"))
	file := filepath.Join(t.TempDir(), "checkpoints")
	l, err := audit.NewLog(s, audit.LogOptions{CheckpointInterval: time.Nanosecond, CheckpointFile: file})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var want []string
	for round := range 3 {
		for range round + 1 {
			if err := l.Append(ctx, &audit.Event{Tenant: "acme", Phase: audit.PhaseDecision, Outcome: "allow"}); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Sync(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		n, err := l.Checkpoint(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, string(n)+"\n")
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != strings.Join(want, "") {
		t.Fatalf("checkpoint file:\n%s\nwant every signed checkpoint, each followed by an empty line:\n%s", got, strings.Join(want, ""))
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("checkpoint file mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
}
