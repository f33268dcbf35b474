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

// With policy.tests, a hot reload that breaks the pack's own tests is
// rejected: the previous revision keeps deciding, GET /v1/policy names
// the failing test, and a fix loads.
func TestAReloadThatFailsThePacksTestsIsRejected(t *testing.T) {
	t.Parallel()
	tests := filepath.Join(t.TempDir(), "policies_test")
	must(t, os.MkdirAll(tests, 0o755))
	must(t, os.WriteFile(filepath.Join(tests, "authz_test.rego"), []byte(`package t

test_reads_allowed if data.toolgate.authz.decision.allow with input as {"tool": {"name": "read-file"}, "resources": []}

test_writes_denied if not data.toolgate.authz.decision.allow with input as {"tool": {"name": "write-file"}, "resources": []}
`), 0o644))
	var pdir string
	h := start(t, func(s *setup) {
		s.toolsYAML = "tools:\n  builtin: [read-file, write-file]\n"
		s.policyYAML = "  tests: " + tests + "\n"
		s.policy = func(dir string) {
			pdir = dir
			for _, f := range []string{"authz.rego", "availability.rego", "audit.rego", "lib.rego"} {
				os.Remove(filepath.Join(dir, f))
			}
			must(t0(), os.WriteFile(filepath.Join(dir, "availability.rego"), []byte("package toolgate.availability\n\ndefault allow := true\n"), 0o644))
			must(t0(), os.WriteFile(filepath.Join(dir, "authz.rego"), []byte("package toolgate.authz\n\ndecision := {\"allow\": input.tool.name == \"read-file\", \"reasons\": [\"reads only\"]}\n"), 0o644))
		}
	})
	admin := h.token("acme", "pat", "policy-admin")
	dev := h.token("acme", "alice", "developer")
	policy := func() response { return h.do("GET", "/v1/policy", admin, nil) }
	first := policy().str("revision")
	if first == "" {
		t.Fatalf("no revision: %s", policy().raw)
	}
	// Break a test: writes allowed too.
	must(t, os.WriteFile(filepath.Join(pdir, "authz.rego"), []byte("package toolgate.authz\n\ndecision := {\"allow\": true, \"reasons\": [\"everything\"]}\n"), 0o644))
	waitFor(t, "the rejected reload", func() bool {
		e, _ := policy().body["last_error"].(map[string]any)
		return e != nil && strings.Contains(e["message"].(string), "data.t.test_writes_denied: FAIL")
	})
	if r := policy(); r.str("revision") != first {
		t.Fatalf("the pack that fails its tests serves: %s", r.raw)
	}
	if r := h.call(dev, "write-file", `{"arguments":{"path":"notes/x.txt","content":"x"}}`); r.str("outcome") != "denied" {
		t.Fatalf("a write under the previous revision: %s", r.raw)
	}
	// Fixed: it loads and the error clears.
	must(t, os.WriteFile(filepath.Join(pdir, "authz.rego"), []byte("package toolgate.authz\n\ndecision := {\"allow\": input.tool.name == \"read-file\", \"reasons\": [\"reads, fixed\"]}\n"), 0o644))
	waitFor(t, "the fixed reload", func() bool {
		r := policy()
		return r.body["last_error"] == nil && r.str("revision") != first
	})
}
