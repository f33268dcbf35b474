package gateway

import (
	"testing"

	"github.com/go-json-experiment/json"
)

func TestPolicyReplayOverTheAPI(t *testing.T) {
	t.Parallel()
	h := start(t)
	alice := h.token("acme", "alice", "developer")
	for _, c := range []struct{ token, tool, args, outcome string }{
		{alice, "read-file", `{"path":"docs/guide.md"}`, "ok"},                                         // allow → allow
		{alice, "read-file", `{"path":"secrets/db.env"}`, "denied"},                                    // deny → allow
		{alice, "write-file", `{"path":"notes/a.txt","content":"x"}`, "ok"},                            // allow → deny (content masked, unused)
		{alice, "write-file", `{"path":"release/VERSION","content":"2"}`, "approval_required"},         // approval → deny
		{h.token("acme", "vera", "viewer"), "write-file", `{"path":"a","content":"x"}`, "unavailable"}, // skipped
	} {
		if r := h.call(c.token, c.tool, `{"arguments":`+c.args+`}`); r.str("outcome") != c.outcome {
			t.Fatalf("%s %s: %s", c.tool, c.args, r.raw)
		}
	}
	body, _ := json.Marshal(map[string]any{"modules": map[string]string{
		"availability.rego": "package toolgate.availability\n\nallow := true\n",
		"authz.rego":        "package toolgate.authz\n\ndecision := {\"allow\": input.tool.name == \"read-file\"}\n",
	}})
	admin := h.token("acme", "pat", "policy-admin")
	r := h.do("POST", "/v1/policy/replay", admin, body)
	if r.status != 200 {
		t.Fatalf("replay: %d %s", r.status, r.raw)
	}
	num := func(v any) int { f, _ := v.(float64); return int(f) }
	dirs := r.body["by_direction"].(map[string]any)
	if num(r.body["events"]) != 5 || num(r.body["replayed"]) != 4 || num(r.body["unchanged"]) != 1 ||
		num(r.body["changed"]) != 3 || num(r.body["skipped"]) != 1 ||
		num(dirs["deny_to_allow"].(map[string]any)["count"]) != 1 ||
		num(dirs["allow_to_deny"].(map[string]any)["count"]) != 1 ||
		num(dirs["approval_to_deny"].(map[string]any)["count"]) != 1 ||
		num(r.body["by_tool"].(map[string]any)["write-file"].(map[string]any)["changed"]) != 2 {
		t.Fatalf("replay report: %s", r.raw)
	}
	// Other tenants' events are not replayed.
	if r := h.do("POST", "/v1/policy/replay", h.token("globex", "gina", "policy-admin"), body); num(r.body["events"]) != 0 {
		t.Fatalf("globex replay: %s", r.raw)
	}
	for _, bad := range []string{
		`{"modules":{"a.rego":"package x\n\nallow if {"}}`,
		`{"modules":{"../a.rego":"package x"}}`,
		`{"candidate":"shadow"}`,
		`{}`,
		`{"modules":{"a.rego":"package x"},"from":"last week"}`,
	} {
		if r := h.do("POST", "/v1/policy/replay", admin, []byte(bad)); r.status != 400 {
			t.Errorf("%s: %d %s", bad, r.status, r.raw)
		}
	}
	if r := h.do("POST", "/v1/policy/replay", alice, body); r.status != 403 {
		t.Fatalf("replay without policy-admin: %d", r.status)
	}
}
