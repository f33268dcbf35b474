package audit

import (
	"bytes"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The one-pass event writer must produce exactly what marshal +
// Canonicalize produced before it, or every chain hash would change.
func TestCanonicalEventMatchesMarshal(t *testing.T) {
	base := func() *Event {
		return &Event{
			ID: "01a2", Time: "2026-12-02T17:00:00.000Z", Tenant: "acme", Principal: "alice",
			CallID: "c-1", DecisionID: "d-1", SessionID: "s-1", Tool: "read-file", Action: "fs.read",
			Phase: PhaseDecision, Outcome: "allow", Reasons: []string{"b", "a \"quoted\"\n"},
			PolicyRevision: "sha256:00", RequestDigest: "sha256:11", Chain: "main",
			Input: map[string]any{"args": map[string]any{"path": "docs/é\U0001F600.md", "n": 3.5, "ü": nil},
				"resources": []any{map[string]any{"type": "file"}}, "\uff61": true, "\U0001F600": false},
			DurationsUS: map[string]int64{"prepare": 19, "decide": 133},
		}
	}
	cases := map[string]func(*Event){
		"decision":          func(*Event) {},
		"with client":       func(e *Event) { e.Client = "platform-a" },
		"nil slices, maps":  func(e *Event) { e.Reasons, e.Input, e.DurationsUS = nil, nil, nil },
		"empty obligations": func(e *Event) { e.Obligations = map[string]any{} },
		"obligations": func(e *Event) {
			e.Obligations = map[string]any{"timeout_ms": 5000.0, "exclude_paths": []any{"secrets/**"}}
		},
		"result":            func(e *Event) { e.Phase, e.Result = PhaseResult, &ResultInfo{Bytes: 42, Truncated: true} },
		"result with error": func(e *Event) { e.Result = &ResultInfo{IsError: true, Error: "open x: \u0001 denied"} },
		"chained":           func(e *Event) { e.Seq, e.PrevHash, e.Hash = 1<<40, "sha256:ff", "sha256:ee" },
		"controls":          func(e *Event) { e.Principal = "a\u2028b\x7f" },
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			ev := base()
			edit(ev)
			raw, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			want := jsontext.Value(raw)
			if err := want.Canonicalize(); err != nil {
				t.Fatal(err)
			}
			got, err := canonicalEvent(ev)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("\n got %s\nwant %s", got, want)
			}
		})
	}
	bad := base()
	bad.Tool = "\xff"
	if _, err := canonicalEvent(bad); err == nil {
		t.Fatal("invalid UTF-8 accepted")
	}
}
