package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPolicyEvalExplainsWithoutEffectOrAuditEvent(t *testing.T) {
	t.Parallel()
	h := start(t)
	admin := h.token("acme", "pat", "policy-admin")
	before := h.snapshot()
	n := h.verify("acme")

	for _, tc := range []struct {
		name, body, outcome string
		wantRule            string
		wantReason          string
	}{
		{"a would-be write to a protected path", `{"tool":"write-file","arguments":{"path":"secrets/x","content":"y"},"principal":{"id":"alice","roles":["developer"]}}`,
			"denied", "data.toolgate.authz.deny", "secrets/x"},
		{"a would-be read", `{"tool":"read-file","arguments":{"path":"docs/guide.md"},"principal":{"id":"alice","roles":["developer"]}}`,
			"allow", "data.toolgate.authz.grants", "allowed"},
		{"a held write", `{"tool":"write-file","arguments":{"path":"release/VERSION","content":"2"},"principal":{"id":"alice","roles":["developer"]}}`,
			"approval_required", "data.toolgate.authz.approvals", "need a human"},
		{"a hidden tool", `{"tool":"write-file","arguments":{},"principal":{"id":"vera","roles":["viewer"]}}`,
			"unavailable", "", ""},
		{"bad arguments", `{"tool":"read-file","arguments":{"path":"../x"},"principal":{"id":"alice","roles":["developer"]}}`,
			"invalid_arguments", "", ""},
		{"a supplied document", `{"input":{"tenant":"acme","principal":{"id":"alice","roles":["developer"],"groups":[],"claims":{}},"tool":{"name":"read-file"},"resources":[{"type":"file","path":"secrets/db.env","access":"read"}],"args":{}}}`,
			"denied", "data.toolgate.authz.deny", "secrets/db.env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("POST", "/v1/policy/eval", admin, []byte(tc.body))
			if r.status != 200 || r.str("outcome") != tc.outcome {
				t.Fatalf("eval: %d %s", r.status, r.raw)
			}
			if tc.wantRule != "" {
				var rules []string
				for _, f := range r.body["rules"].([]any) {
					rules = append(rules, f.(map[string]any)["rule"].(string))
				}
				if !strings.Contains(strings.Join(rules, " "), tc.wantRule) {
					t.Errorf("rules %v lack %s", rules, tc.wantRule)
				}
				if !strings.Contains(strings.Join(strs(r.body["reasons"]), ";"), tc.wantReason) {
					t.Errorf("reasons %v lack %q", r.body["reasons"], tc.wantReason)
				}
			}
		})
	}

	for _, mode := range []string{"notes", "fails", "full"} {
		r := h.do("POST", "/v1/policy/eval", admin, []byte(`{"explain":"`+mode+`","tool":"read-file","arguments":{"path":"secrets/db.env"},"principal":{"id":"alice","roles":["developer"]}}`))
		lines := strs(r.body["explanation"])
		if r.status != 200 || (mode != "notes" && len(lines) == 0) {
			t.Fatalf("explain=%s: %d %s", mode, r.status, r.raw)
		}
		if mode == "full" && !strings.Contains(strings.Join(lines, "\n"), "Enter data.toolgate.authz.decision") {
			t.Errorf("full explanation does not trace the decision:\n%s", strings.Join(lines, "\n"))
		}
	}

	for _, tc := range []struct{ name, body string }{
		{"both shapes", `{"input":{},"tool":"read-file","principal":{"id":"a"}}`},
		{"no principal", `{"tool":"read-file"}`},
		{"another tenant's document", `{"input":{"tenant":"globex"}}`},
		{"unknown explain", `{"input":{},"explain":"all"}`},
		{"unknown member", `{"input":{},"tenant":"globex"}`},
	} {
		if r := h.do("POST", "/v1/policy/eval", admin, []byte(tc.body)); r.status != 400 {
			t.Errorf("%s: %d %s", tc.name, r.status, r.raw)
		}
	}
	if r := h.do("POST", "/v1/policy/eval", h.token("acme", "alice", "developer"), []byte(`{"input":{}}`)); r.status != 403 {
		t.Fatalf("eval without policy-admin: %d", r.status)
	}
	h.assertUnchanged(before)
	if got := h.verify("acme"); got != n {
		t.Fatalf("evaluations wrote %d audit events", got-n)
	}
}

// brokenAuthz loads and compiles, but fails at run time for some inputs:
// a conflict (two values for one complete rule) and a builtin's error.
const brokenAuthz = `package toolgate.authz

verdict := "allow" if input.args.path == "conflict.txt"

verdict := "deny" if input.args.path == "conflict.txt"

default decision := {"allow": true, "reasons": ["fine"]}

decision := {"allow": verdict == "allow", "reasons": ["conflicted"]} if input.args.path == "conflict.txt"

decision := {"allow": to_number(input.args.path) > 0, "reasons": ["a number"]} if input.args.path == "not-a-number.txt"
`

// An author sees the policy's runtime error — its code, message and
// file:row — instead of a bare 503; the explanation runs up to it.
func TestPolicyEvalShowsARuntimeErrorWithItsLocation(t *testing.T) {
	t.Parallel()
	h := start(t, func(s *setup) {
		s.files = map[string]string{"acme/fine.txt": "x", "acme/conflict.txt": "x", "acme/not-a-number.txt": "x"}
		s.policy = func(dir string) {
			for _, f := range []string{"authz.rego", "availability.rego", "audit.rego", "lib.rego"} {
				os.Remove(filepath.Join(dir, f))
			}
			must(t0(), os.WriteFile(filepath.Join(dir, "availability.rego"), []byte("package toolgate.availability\n\ndefault allow := true\n"), 0o644))
			must(t0(), os.WriteFile(filepath.Join(dir, "authz.rego"), []byte(brokenAuthz), 0o644))
		}
	})
	admin := h.token("acme", "pat", "policy-admin")
	eval := func(path, explain string) response {
		return h.do("POST", "/v1/policy/eval", admin, []byte(`{"explain":"`+explain+`","tool":"read-file","arguments":{"path":"`+path+`"},"principal":{"id":"alice","roles":["developer"]}}`))
	}
	if r := eval("fine.txt", ""); r.status != 200 || r.str("outcome") != "allow" || r.body["error"] != nil {
		t.Fatalf("a path the policy handles: %d %s", r.status, r.raw)
	}
	for _, tc := range []struct{ path, code, location string }{
		{"conflict.txt", "eval_conflict_error", "authz.rego:5"}, // the second value
		{"not-a-number.txt", "eval_builtin_error", "authz.rego:11"},
	} {
		r := eval(tc.path, "full")
		e, _ := r.body["error"].(map[string]any)
		if r.status != 200 || r.str("outcome") != "error" || e == nil || e["code"] != tc.code ||
			!strings.HasSuffix(e["location"].(string), tc.location) || e["message"] == "" {
			t.Fatalf("%s: %d %s", tc.path, r.status, r.raw)
		}
		if strings.Contains(e["location"].(string), h.dir) {
			t.Errorf("%s: the location names a host path: %s", tc.path, e["location"])
		}
		if len(strs(r.body["explanation"])) == 0 || len(strs(r.body["reasons"])) == 0 {
			t.Errorf("%s: no explanation or reason: %s", tc.path, r.raw)
		}
	}
	// The call itself still fails closed, and the model sees no detail.
	dev := h.token("acme", "alice", "developer")
	if r := h.call(dev, "read-file", `{"arguments":{"path":"conflict.txt"}}`); r.status != 503 || strings.Contains(string(r.raw), "conflict") {
		t.Fatalf("a call the policy fails on: %d %s", r.status, r.raw)
	}
}
