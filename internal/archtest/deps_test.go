package archtest

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/toolgate/toolgate"

// configMayBeUsedBy are the packages allowed to depend on internal/config,
// directly or not: the composition root (internal/gateway) and the
// commands. Everything else receives typed values that its owner declares
// (auth.Config, telemetry.Config, ...), not the configuration.
var configMayBeUsedBy = []string{
	module + "/internal/config",
	module + "/internal/gateway",
	module + "/cmd/",
}

// deps runs go list over patterns in the module and returns, per package,
// its transitive dependencies (non-test).
func deps(t *testing.T, patterns ...string) map[string][]string {
	t.Helper()
	args := append([]string{"list", "-f", "{{.ImportPath}} {{join .Deps \" \"}}"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	m := make(map[string][]string)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 {
			m[f[0]] = f[1:]
		}
	}
	return m
}

// The whiteboard's rule: packages receive typed values, not the config.
// internal/auth and internal/telemetry are named explicitly (the rule's
// first owners); every other package of the module is held to it too.
func TestOnlyTheCompositionRootDependsOnConfig(t *testing.T) {
	all := deps(t, "./...")
	for _, must := range []string{module + "/internal/auth", module + "/internal/telemetry"} {
		if _, ok := all[must]; !ok {
			t.Fatalf("go list ./... did not list %s", must)
		}
	}
	if len(all) < 30 {
		t.Fatalf("go list ./... listed only %d packages", len(all))
	}
	for pkg, ds := range all {
		allowed := false
		for _, a := range configMayBeUsedBy {
			if pkg == a || strings.HasSuffix(a, "/") && strings.HasPrefix(pkg, a) {
				allowed = true
			}
		}
		if allowed {
			continue
		}
		for _, d := range ds {
			if d == module+"/internal/config" {
				t.Errorf("%s depends on internal/config (go list -deps %s): take the owner's typed config instead", pkg, strings.TrimPrefix(pkg, module+"/"))
			}
		}
	}
}
