package audit_test

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/audit"
)

// goldenEvent has fixed ids and times, so its hashes are fixed too.
func goldenEvent(i int) *audit.Event {
	return &audit.Event{
		ID:          []string{"ev-1", "ev-2"}[i],
		Time:        []string{"2025-03-01T12:00:00.001Z", "2025-03-01T12:00:00.002Z"}[i],
		Tenant:      "acme",
		Principal:   "alice",
		CallID:      "call-1",
		DecisionID:  "dec-1",
		SessionID:   "s-1",
		Tool:        "read-file",
		Action:      "fs.read",
		Phase:       []string{audit.PhaseDecision, audit.PhaseResult}[i],
		Outcome:     []string{"allow", "ok"}[i],
		Reasons:     []string{"développeur ✓"}, // non-ASCII stays literal in JCS
		Input:       map[string]any{"args": map[string]any{"path": "docs/guide.md", "limit": 10, "ratio": 0.5}},
		DurationsUS: map[string]int64{"prepare": 12},
	}
}

// The hash definition is a contract with auditors: these values must only
// change with a documented, versioned change of the definition. They were
// cross-checked with an independent JCS implementation (Python json.dumps
// with sorted keys and compact separators, exact for these values).
var goldenHashes = []string{
	"sha256:b28b16738933978864c14922129d845006edacbd92e1cb0e39d40f1fcac34a44",
	"sha256:66a88399c8802cccb6c7cfe5842307716a61653ecb3849d9c14a924abc29bbc6",
}

func TestHashDefinition(t *testing.T) {
	s := openSQLite(t, filepath.Join(t.TempDir(), "audit.db"))
	l, err := audit.NewLog(s, audit.LogOptions{Now: func() time.Time { panic("time is set") }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	prev := ""
	for i := range goldenHashes {
		ev := goldenEvent(i)
		if err := l.Append(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
		// Recompute from the definition: canonical JSON of the event object
		// without "hash", SHA-256, hex, "sha256:" prefix.
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "hash")
		sum := sha256.Sum256([]byte(canon(t, m)))
		want := "sha256:" + hex.EncodeToString(sum[:])
		if ev.Hash != want || ev.PrevHash != prev || ev.Seq != int64(i+1) {
			t.Fatalf("event %d: hash %s prev %q seq %d; want hash %s prev %q seq %d", i, ev.Hash, ev.PrevHash, ev.Seq, want, prev, i+1)
		}
		if ev.Hash != goldenHashes[i] {
			t.Fatalf("event %d: hash %s, golden %s: the hash definition changed", i, ev.Hash, goldenHashes[i])
		}
		prev = ev.Hash
	}
}

func TestComputeHashRejectsNonObjects(t *testing.T) {
	for _, raw := range []string{``, `[]`, `"x"`, `{"a":1} {}`, `{"hash":1}`, `{"a":1,"a":2}`} {
		if _, err := audit.ComputeHash([]byte(raw)); err == nil {
			t.Errorf("ComputeHash(%q) succeeded", raw)
		}
	}
	// Formatting does not matter, content does.
	a, err1 := audit.ComputeHash([]byte(`{"b":1,"a":"x","hash":"sha256:whatever"}`))
	b, err2 := audit.ComputeHash([]byte(" {\"a\" : \"x\", \"b\" : 1.0}\n"))
	if err1 != nil || err2 != nil || a != b {
		t.Fatalf("ComputeHash differs on equal content: %s %s %v %v", a, b, err1, err2)
	}
}
