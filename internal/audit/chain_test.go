package audit_test

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"go.opentelemetry.io/otel/trace"

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
// with sorted keys, compact separators and ensure_ascii=False, exact for
// these values). goldenHashes are of events of leaf version 1, as the log
// wrote them before leaf versions (chain "", seq 0, prev_hash "", no
// leaf_version), leafV2Hashes of the same events as the log writes them
// now ("leaf_version": 2), chainHashes of the same events as the
// hash-chain era wrote them (chain "main", seq 1 and 2, linked).
var (
	leafV2Hashes = []string{
		"sha256:89204ef5b695c8c99c715fcd1414cb8f0e97f5e5bb601f96b1adc59522575e18",
		"sha256:c1841564095c074fbdf3f5823a573738b65ae18d656c1a6e48dffc347f4a1f0f",
	}
	goldenHashes = []string{
		"sha256:ead30ee1a7b32fba5a905cab34a37ec203bc0eaf39b3f696d109611aa09b4b85",
		"sha256:c5dfa1de4b21d15677c4e26944b49d109ec8fcb28c3e5e145b6b73f83c536d3f",
	}
	chainHashes = []string{
		"sha256:b28b16738933978864c14922129d845006edacbd92e1cb0e39d40f1fcac34a44",
		"sha256:66a88399c8802cccb6c7cfe5842307716a61653ecb3849d9c14a924abc29bbc6",
	}
)

func TestHashDefinition(t *testing.T) {
	s := openSQLite(t, filepath.Join(t.TempDir(), "audit.db"))
	l, err := audit.NewLog(s, audit.LogOptions{Now: func() time.Time { panic("time is set") }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := range leafV2Hashes {
		ev := goldenEvent(i)
		if err := l.Append(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
		if ev.LeafVersion != audit.LeafVersion2 {
			t.Fatalf("event %d: leaf_version %d, want the log to write %d", i, ev.LeafVersion, audit.LeafVersion2)
		}
		// Recompute from the definition: canonical JSON of the event object
		// without "hash" (and "log_index"), SHA-256, hex, "sha256:" prefix.
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
		if ev.Hash != want || ev.PrevHash != "" || ev.Seq != 0 || ev.Chain != "" {
			t.Fatalf("event %d: hash %s chain %q seq %d prev %q; want hash %s and no chain link", i, ev.Hash, ev.Chain, ev.Seq, ev.PrevHash, want)
		}
		if ev.Hash != leafV2Hashes[i] {
			t.Fatalf("event %d: hash %s, golden %s: the hash definition changed", i, ev.Hash, leafV2Hashes[i])
		}
		// log_index is not part of it.
		idx := int64(7)
		ev.LogIndex = &idx
		if b, err = json.Marshal(ev); err != nil {
			t.Fatal(err)
		}
		if h, err := audit.ComputeHash(b); err != nil || h != leafV2Hashes[i] {
			t.Fatalf("event %d with a log_index hashes to %s, %v", i, h, err)
		}
		// The same event as the log wrote it before leaf versions
		// (version 1: no leaf_version member) keeps its hash.
		ev.LeafVersion = 0
		if b, err = json.Marshal(ev); err != nil {
			t.Fatal(err)
		}
		if h, err := audit.ComputeHash(b); err != nil || h != goldenHashes[i] {
			t.Fatalf("event %d of leaf version 1 hashes to %s, %v; golden %s", i, h, err, goldenHashes[i])
		}
	}
	// Events of the hash-chain era keep their hashes.
	prev := ""
	for i := range chainHashes {
		ev := goldenEvent(i)
		ev.Chain, ev.Seq, ev.PrevHash = "main", int64(i+1), prev
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if h, err := audit.ComputeHash(b); err != nil || h != chainHashes[i] {
			t.Fatalf("hash-chain era event %d hashes to %s, %v; golden %s", i, h, err, chainHashes[i])
		}
		prev = chainHashes[i]
	}
}

// traceHashes are goldenEvent's hashes with trace_id
// "4bf92f3577b34da6a3ce929d0e0e4736" as the log writes them (leaf version
// 2), traceV1Hashes as it wrote them before leaf versions; cross-checked
// like goldenHashes.
var (
	traceHashes = []string{
		"sha256:89648b7b19d3dad7b36993cd81ac8b0c2ed9ccbe31a04a8780a58e9047fd6ffe",
		"sha256:8ca8166c0fac611b1e628043abeb378ea098a5356474146c04d433cdfa239b11",
	}
	traceV1Hashes = []string{
		"sha256:5ea16c1de23e33daadef354a670db131d198488fbc9ca812306445da5fe9cd5f",
		"sha256:a52f1d8ae82bc33171415b4cafa4e20bbaed90220efe56322529e56fc8193a63",
	}
)

// trace_id is hashed content: Append takes it from the request's span,
// the hash covers it, an edit of it no longer verifies, and events
// without one keep the hashes they always had (TestHashDefinition).
func TestHashDefinitionWithTraceID(t *testing.T) {
	s := openSQLite(t, filepath.Join(t.TempDir(), "audit.db"))
	l, err := audit.NewLog(s, audit.LogOptions{Now: func() time.Time { panic("time is set") }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithRemoteSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))
	for i := range traceHashes {
		ev := goldenEvent(i)
		if err := l.Append(ctx, ev); err != nil {
			t.Fatal(err)
		}
		if ev.TraceID != tid.String() || ev.Hash != traceHashes[i] {
			t.Fatalf("event %d: trace_id %q hash %s; want %s and golden %s", i, ev.TraceID, ev.Hash, tid, traceHashes[i])
		}
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if h, err := audit.ComputeHash(b); err != nil || h != traceHashes[i] {
			t.Fatalf("event %d recomputed: %s, %v", i, h, err)
		}
		v1 := *ev
		v1.LeafVersion = 0
		if b1, _ := json.Marshal(&v1); true {
			if h, err := audit.ComputeHash(b1); err != nil || h != traceV1Hashes[i] {
				t.Fatalf("event %d of leaf version 1 recomputed: %s, %v; golden %s", i, h, err, traceV1Hashes[i])
			}
		}
		// Another trace id is another event.
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		m["trace_id"] = "0af7651916cd43dd8448eb211c80319c"
		forged, _ := json.Marshal(m)
		if h, _ := audit.ComputeHash(forged); h == traceHashes[i] {
			t.Fatalf("event %d: changing trace_id kept the hash", i)
		}
	}
	// A trace id the caller set wins over the context's.
	ev := goldenEvent(0)
	ev.ID, ev.TraceID = "ev-3", "0af7651916cd43dd8448eb211c80319c"
	if err := l.Append(ctx, ev); err != nil || ev.TraceID != "0af7651916cd43dd8448eb211c80319c" {
		t.Fatalf("explicit trace id: %q, %v", ev.TraceID, err)
	}
	// No span, no trace id: the member is absent, not empty.
	ev = goldenEvent(1)
	ev.ID = "ev-4"
	if err := l.Append(t.Context(), ev); err != nil || ev.TraceID != "" {
		t.Fatalf("event without a span: trace_id %q, %v", ev.TraceID, err)
	}
	if b, _ := json.Marshal(ev); strings.Contains(string(b), "trace_id") {
		t.Fatalf("event without a trace id has the member: %s", b)
	} else if h, err := audit.ComputeHash(b); err != nil || h != ev.Hash {
		t.Fatalf("event without a trace id hashes to %s, %v; stored %s", h, err, ev.Hash)
	}
	if err := l.Sync(t.Context(), "acme"); err != nil {
		t.Fatal(err)
	}
	got, err := l.Get(t.Context(), "acme", "ev-1")
	if err != nil || got.TraceID != tid.String() {
		t.Fatalf("stored event: %+v, %v", got, err)
	}
	if res, err := l.Verify(t.Context(), "acme"); err != nil || !res.OK || res.EventsChecked != 4 {
		t.Fatalf("verify: %+v, %v", res, err)
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
