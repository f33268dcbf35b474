package gateway

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/decision/bundletest"
)

// shadowPolicy denies every read-file and allows everything else.
func writeShadowPolicy(t *testing.T, dir string) {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "availability.rego"), []byte("package toolgate.availability\n\nallow := true\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "authz.rego"), []byte(`package toolgate.authz

decision := {"allow": input.tool.name != "read-file", "reasons": ["shadow"]}
`), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, ".manifest"), []byte(`{"revision":"shadow-1"}`), 0o644))
}

func TestShadowPolicyDivergencesAreCountedAndAuditedWithoutChangingOutcomes(t *testing.T) {
	t.Parallel()
	shadowDir := filepath.Join(t.TempDir(), "shadow")
	writeShadowPolicy(t, shadowDir)
	files, err := bundletest.ReadDir(shadowDir)
	must(t, err)
	raw, err := bundletest.Build(files, "shadow-1", nil)
	must(t, err)
	shadowBundle := filepath.Join(t.TempDir(), "shadow.tar.gz")
	must(t, os.WriteFile(shadowBundle, raw, 0o644))
	for name, src := range map[string]string{"folder": shadowDir, "bundle file": shadowBundle} {
		t.Run(name, func(t *testing.T) { testShadow(t, src) })
	}
}

func testShadow(t *testing.T, shadow string) {
	h := start(t, func(s *setup) { s.policyYAML = "  shadow: " + shadow + "\n" })
	alice := h.token("acme", "alice", "developer")

	for _, tc := range []struct {
		tool, args, outcome, shadow string
		diverged                    bool
	}{
		{"read-file", `{"path":"docs/guide.md"}`, "ok", "denied", true},       // allow → deny
		{"read-file", `{"path":"secrets/db.env"}`, "denied", "denied", false}, // both deny
		{"write-file", `{"path":"notes/a.txt","content":"x"}`, "ok", "allow", false},
		{"write-file", `{"path":"secrets/x","content":"x"}`, "denied", "allow", true}, // deny → allow
		{"write-file", `{"path":"src/b.txt","content":"x"}`, "ok", "allow", false},
	} {
		r := h.call(alice, tc.tool, `{"arguments":`+tc.args+`}`)
		if r.str("outcome") != tc.outcome {
			t.Fatalf("%s %s: outcome %s, want the enforced %s", tc.tool, tc.args, r.str("outcome"), tc.outcome)
		}
		evs := h.events("acme", "phase=decision&call_id="+r.str("call_id"))
		sh, _ := evs[0]["shadow"].(map[string]any)
		if sh["revision"] != "shadow-1" || sh["outcome"] != tc.shadow || sh["diverged"] != tc.diverged {
			t.Errorf("%s %s: shadow %v, want %s diverged=%v", tc.tool, tc.args, sh, tc.shadow, tc.diverged)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(h.dir, "ws/acme/secrets/x")); b != nil {
		t.Fatal("the shadow's allow took effect")
	}
	want := map[string]string{"agree": "3", "allow_to_deny": "1", "deny_to_allow": "1", "error": "0"}
	got := map[string]string{}
	r := h.do("GET", "/metrics", "", nil)
	sc := bufio.NewScanner(strings.NewReader(string(r.raw)))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, `toolgate_shadow_decisions_total{result="`); ok {
			k, v, _ := strings.Cut(rest, `"} `)
			got[k] = v
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("toolgate_shadow_decisions_total{result=%q} = %q, want %s", k, got[k], v)
		}
	}
	h.verify("acme")
}
