package config

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/sandbox"
)

// limits.cpu_weight and its per-tenant override: every bad value is an
// error naming the key and the problem; defaults and overrides resolve.
func TestCPUWeight(t *testing.T) {
	tenantLimits := func(body string) string {
		return strings.Replace(goodYAML, "    workspace: var/workspaces/acme\n",
			"    workspace: var/workspaces/acme\n    limits:\n"+body, 1)
	}
	for _, tt := range []struct{ name, yaml, key, problem string }{
		{"zero", goodYAML + "limits:\n  cpu_weight: 0\n", "limits.cpu_weight", "must be between 1 and 10000, got 0"},
		{"too big", goodYAML + "limits:\n  cpu_weight: 10001\n", "limits.cpu_weight", "must be between 1 and 10000, got 10001"},
		{"a fraction", goodYAML + "limits:\n  cpu_weight: 1.5\n", "limits.cpu_weight", "expected an integer"},
		{"tenant negative", tenantLimits("      cpu_weight: -1\n"), "tenants.acme.limits.cpu_weight", "must be between 1 and 10000, got -1"},
		{"tenant text", tenantLimits("      cpu_weight: high\n"), "tenants.acme.limits.cpu_weight", "expected an integer"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, file := fixture(t, tt.yaml)
			_, err := Load(file)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, ce := range configErrors(t, err) {
				if ce.File == file && ce.Key == tt.key && strings.Contains(ce.Problem, tt.problem) {
					return
				}
			}
			t.Errorf("no error with key %q and problem %q; got:\n%v", tt.key, tt.problem, err)
		})
	}
	_, file := fixture(t, tenantLimits("      cpu_weight: 400\n")+"limits:\n  cpu_weight: 50\n")
	cfg, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.CPUWeight("acme") != 400 || cfg.CPUWeight("other") != 50 {
		t.Errorf("acme %d (want 400), other %d (want 50)", cfg.CPUWeight("acme"), cfg.CPUWeight("other"))
	}
	_, file = fixture(t, goodYAML)
	if cfg, err = Load(file); err != nil || cfg.Limits.CPUWeight != sandbox.DefaultCPUWeight || (&Config{}).CPUWeight("x") != sandbox.DefaultCPUWeight {
		t.Errorf("defaults: %v %+v", err, cfg.Limits)
	}
}
