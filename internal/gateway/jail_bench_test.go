package gateway

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkBashJail is the per-call cost of the command jail through the
// whole gateway (HTTP handler, policy, durable audit, the bash tool):
// `echo hi` (a builtin: the jail and its interpreter without any program),
// /bin/true, a three-program pipeline and `go version`, in each
// confinement mode.
// "gateway-helper" re-executes this test binary as the helper (it links
// the same packages as the gateway, so its start-up cost is the
// gateway's); "toolgate-sandbox" uses the dedicated helper binary.
// BenchmarkExecDirect runs the same programs with exec.Command.
func BenchmarkBashJail(b *testing.B) {
	helper := filepath.Join(b.TempDir(), HelperName)
	if out, err := exec.Command("go", "build", "-o", helper, "../../cmd/toolgate-sandbox").CombinedOutput(); err != nil {
		b.Fatalf("building the helper: %v\n%s", err, out)
	}
	modes := []struct{ name, yaml string }{
		{"landlock-only", "sandbox:\n  mode: landlock-only\n"},
		{"jail-gateway-helper", ""},
		{"jail-toolgate-sandbox", "sandbox:\n  helper: " + helper + "\n"},
		{"jail-toolgate-sandbox-no-cgroup", "sandbox:\n  helper: " + helper + "\n  memory_cgroup: false\n"},
	}
	for _, m := range modes {
		h := start(b, withAllTools, allowAllPack(b), func(s *setup) {
			s.extraYAML = m.yaml
			s.gatewayHelper = m.yaml == "" // the test binary builds the jails
		})
		dev := h.token("acme", "alice", "developer")
		for _, c := range []struct{ name, cmd string }{
			{"echo", "echo hi"}, {"true", "/bin/true"}, {"pipeline", "cat docs/guide.md | sort | wc -l"}, {"go", "go version"},
		} {
			body, _ := json.Marshal(map[string]any{"arguments": map[string]any{"command": c.cmd}, "session_id": "s1"})
			b.Run(m.name+"/"+c.name, func(b *testing.B) {
				for b.Loop() {
					r := h.call(dev, "bash", string(body))
					if r.str("outcome") != "ok" || !strings.Contains(r.str("content"), "[exit code: 0]") {
						b.Fatalf("%s: %s", c.cmd, r.raw)
					}
				}
			})
		}
	}
}

func BenchmarkExecDirect(b *testing.B) {
	for _, argv := range [][]string{{"/bin/true"}, {"go", "version"}} {
		b.Run(argv[0], func(b *testing.B) {
			for b.Loop() {
				if err := exec.Command(argv[0], argv[1:]...).Run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
