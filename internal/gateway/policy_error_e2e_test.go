package gateway

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// brokenAvailability fails at run time for one tool: a conflict.
const brokenAvailability = `package toolgate.availability

default allow := true

offer := "yes" if input.tool.name == "write-file"

offer := "no" if input.tool.name == "write-file"

allow := offer == "yes" if input.tool.name == "write-file"
`

// Every decision is in the log, the failed ones too: a policy that fails
// at run time (a conflict, a builtin's error, in authorization or in
// availability) fails the call closed with a bare 503, and the decision
// event records outcome error with OPA's code, message and file:row, for
// the auditor and in the OPA export; the log still verifies.
func TestAFailedDecisionIsAudited(t *testing.T) {
	t.Parallel()
	h := start(t, func(s *setup) {
		s.toolsYAML = "tools:\n  builtin: [read-file, write-file]\n"
		s.files = map[string]string{"acme/fine.txt": "x", "acme/conflict.txt": "x", "acme/not-a-number.txt": "x"}
		s.policy = func(dir string) {
			for _, f := range []string{"authz.rego", "availability.rego", "audit.rego", "lib.rego"} {
				os.Remove(filepath.Join(dir, f))
			}
			must(t0(), os.WriteFile(filepath.Join(dir, "availability.rego"), []byte(brokenAvailability), 0o644))
			must(t0(), os.WriteFile(filepath.Join(dir, "authz.rego"), []byte(brokenAuthz), 0o644))
		}
	})
	dev := h.token("acme", "alice", "developer")
	if r := h.call(dev, "read-file", `{"arguments":{"path":"fine.txt"}}`); r.str("outcome") != "ok" {
		t.Fatalf("a call the policy decides: %d %s", r.status, r.raw)
	}
	for _, tc := range []struct {
		name, tool, body, code, location, path string
	}{
		{"authz conflict", "read-file", `{"call_id":"c-conflict","arguments":{"path":"conflict.txt"}}`, "eval_conflict_error", "authz.rego:5", "toolgate/authz/decision"},
		{"authz builtin error", "read-file", `{"call_id":"c-nan","arguments":{"path":"not-a-number.txt"}}`, "eval_builtin_error", "authz.rego:11", "toolgate/authz/decision"},
		{"availability conflict", "write-file", `{"call_id":"c-avail","arguments":{"path":"new.txt","content":"x"}}`, "eval_conflict_error", "availability.rego:7", "toolgate/availability/allow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.call(dev, tc.tool, tc.body)
			if r.status != 503 || strings.Contains(string(r.raw), tc.code) || strings.Contains(string(r.raw), ".rego") {
				t.Fatalf("the model's answer: %d %s", r.status, r.raw)
			}
			var callID string
			must(t, json.Unmarshal([]byte(tc.body), &struct {
				CallID *string `json:"call_id"`
			}{&callID}))
			evs := h.events("acme", "call_id="+callID)
			if len(evs) != 1 {
				t.Fatalf("%d events for the failed call, want its one decision event: %v", len(evs), evs)
			}
			ev := evs[0]
			e, _ := ev["error"].(map[string]any)
			if ev["phase"] != "decision" || ev["outcome"] != "error" || e == nil || e["code"] != tc.code ||
				!strings.HasSuffix(e["location"].(string), tc.location) || e["message"] == "" || ev["tool"] != tc.tool {
				t.Fatalf("the decision event: %v", ev)
			}
			if in, _ := ev["input"].(map[string]any); in == nil || in["principal"] == nil {
				t.Errorf("the event holds no input: %v", ev)
			}
			var line map[string]any
			for _, l := range h.exportAs("acme", "format=opa") {
				var m map[string]any
				must(t, json.Unmarshal(l, &m))
				if m["custom"].(map[string]any)["call_id"] == callID {
					line = m
				}
			}
			oe, _ := line["error"].(map[string]any)
			loc, _ := oe["location"].(map[string]any)
			if line == nil || line["path"] != tc.path || oe["code"] != tc.code || loc == nil ||
				!strings.HasSuffix(tc.location, fmt.Sprintf("%s:%v", loc["file"], loc["row"])) {
				t.Fatalf("the OPA export line: %v", line)
			}
		})
	}
	if n := len(h.events("acme", "outcome=error")); n != 3 {
		t.Fatalf("%d events of outcome error, want 3", n)
	}
	// A typo is an error, not an empty page.
	auditor := h.token("acme", "auditor-1", "auditor")
	for _, q := range []string{"outcome=deny", "outcome=denied,unavailable", "phase=decisions"} {
		if r := h.do("GET", "/v1/audit/events?"+q, auditor, nil); r.status != 400 || !strings.Contains(string(r.raw), "one of") {
			t.Errorf("%s: %d %s", q, r.status, r.raw)
		}
	}
	h.verify("acme")
}
