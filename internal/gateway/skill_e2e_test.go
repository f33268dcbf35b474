package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// withSkills gives tenant acme a skill library with the two demo skills
// and pins release-notes to a digest its file does not have.
func withSkills(t *testing.T) func(*setup) {
	return func(s *setup) {
		s.toolsYAML = "tools:\n  builtin: [read-file, skill]\n"
		s.acmeYAML = "    skills: skills\n"
		s.policy = func(pdir string) {
			must(t, os.CopyFS(filepath.Join(filepath.Dir(pdir), "skills"), os.DirFS("../../demo/skills/acme")))
			data := filepath.Join(pdir, "data.yaml")
			b, err := os.ReadFile(data)
			must(t, err)
			pinned := strings.Replace(string(b), "      approval_write: [\"release/**\"]\n",
				"      approval_write: [\"release/**\"]\n      skill_digests: {release-notes: \"sha256:0000\"}\n", 1)
			if pinned == string(b) {
				t.Fatal("data.yaml fixture text not found")
			}
			must(t, os.WriteFile(data, []byte(pinned), 0o644))
		}
	}
}

func TestSkillToolEndToEnd(t *testing.T) {
	t.Parallel()
	h := start(t, withSkills(t))
	dev := h.token("acme", "alice", "developer")
	viewer := h.token("acme", "victor", "viewer")

	// Each caller is shown the skills availability offers it, and held to
	// exactly that schema.
	for _, c := range []struct {
		token, enum string
	}{
		{dev, `"enum":["code-review","release-notes"]`},
		{viewer, `"enum":["code-review"]`},
	} {
		r := h.do("GET", "/v1/tools", c.token, nil)
		var schema string
		for _, tl := range r.body["tools"].([]any) {
			if m := tl.(map[string]any); m["name"] == "skill" {
				schema = canonicalJSON(t, m["input_schema"])
			}
		}
		if !strings.Contains(schema, c.enum) || !strings.Contains(schema, "- code-review: Review a change") {
			t.Errorf("skill schema %s, want %s with descriptions", schema, c.enum)
		}
	}

	r := h.call(viewer, "skill", `{"arguments":{"name":"code-review"},"call_id":"sk-1"}`)
	if r.str("outcome") != "ok" || !strings.HasPrefix(r.str("content"), "# Code review") {
		t.Fatalf("allowed skill: %s", r.raw)
	}
	if data := r.body["data"].(map[string]any); data["version"] != "1.0.0" || !strings.HasPrefix(data["digest"].(string), "sha256:") {
		t.Fatalf("data %v", data)
	}
	ev := h.events("acme", "call_id=sk-1&limit=10")
	res := ev[len(ev)-1]["input"].(map[string]any)["resources"].([]any)[0].(map[string]any)
	if res["type"] != "skill" || res["name"] != "code-review" || res["digest"] != r.body["data"].(map[string]any)["digest"] {
		t.Fatalf("audited resource %v", res)
	}

	r = h.call(dev, "skill", `{"arguments":{"name":"release-notes"}}`)
	if r.str("outcome") != "denied" || r.str("content") != "skill release-notes is not the reviewed version" {
		t.Fatalf("pinned skill with other content: %s", r.raw)
	}
	r = h.call(viewer, "skill", `{"arguments":{"name":"release-notes"}}`)
	if r.str("outcome") != "invalid_arguments" || r.str("content") != "invalid arguments: /name: must be one of the allowed values" {
		t.Fatalf("skill not offered to the caller: %s", r.raw)
	}
	h.verify("acme")
}

// Policy eval prepares a would-be skill call as the real call would be:
// against the impersonated caller's own schema, so a skill availability
// does not offer that caller is invalid there too.
func TestPolicyEvalHoldsAWouldBeSkillCallToTheCallersSchema(t *testing.T) {
	t.Parallel()
	h := start(t, withSkills(t))
	admin := h.token("acme", "pat", "policy-admin")
	viewer := h.token("acme", "victor", "viewer")
	for _, tc := range []struct{ name, args, eval, call string }{
		{"an offered skill", `{"name":"code-review"}`, "allow", "ok"},
		{"a skill not offered to the caller", `{"name":"release-notes"}`, "invalid_arguments", "invalid_arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("POST", "/v1/policy/eval", admin, []byte(`{"tool":"skill","arguments":`+tc.args+`,"principal":{"id":"victor","roles":["viewer"]}}`))
			if r.status != 200 || r.str("outcome") != tc.eval {
				t.Fatalf("eval: %d %s, want %s", r.status, r.raw, tc.eval)
			}
			if real := h.call(viewer, "skill", `{"arguments":`+tc.args+`}`); real.str("outcome") != tc.call {
				t.Fatalf("the real call: %d %s, want %s", real.status, real.raw, tc.call)
			}
		})
	}
}
