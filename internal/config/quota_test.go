package config

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/quota/quotatest"
)

// limits.workspace_bytes and its per-tenant override: every bad value is
// an error naming the file, the line, the key and the problem.
func TestWorkspaceBytesErrorsNameTheKey(t *testing.T) {
	tenantLimits := func(body string) string {
		return strings.Replace(goodYAML, "    workspace: var/workspaces/acme\n",
			"    workspace: var/workspaces/acme\n    limits:\n"+body, 1)
	}
	tests := []struct {
		name    string
		yaml    string
		line    int
		key     string
		problem string
	}{
		{"zero", goodYAML + "limits:\n  workspace_bytes: 0\n", 21,
			"limits.workspace_bytes", "must be a positive number of bytes, got 0"},
		{"negative", goodYAML + "limits:\n  workspace_bytes: -1048576\n", 21,
			"limits.workspace_bytes", "must be a positive number of bytes, got -1048576"},
		{"a unit is not a number", goodYAML + "limits:\n  workspace_bytes: 1GiB\n", 21,
			"limits.workspace_bytes", `expected an integer, got the string "1GiB"`},
		{"a fraction", goodYAML + "limits:\n  workspace_bytes: 1.5\n", 21,
			"limits.workspace_bytes", "expected an integer, got the number 1.5"},
		{"beyond 64 bits", goodYAML + "limits:\n  workspace_bytes: 99999999999999999999\n", 21,
			"limits.workspace_bytes", "expected an integer, got the number 99999999999999999999"},
		{"one past int64", goodYAML + "limits:\n  workspace_bytes: 9223372036854775808\n", 21,
			"limits.workspace_bytes", "integer 9223372036854775808 is out of range"},
		{"a list", goodYAML + "limits:\n  workspace_bytes: [1]\n", 21,
			"limits.workspace_bytes", "expected an integer, got a list"},
		{"tenant zero", tenantLimits("      workspace_bytes: 0\n"), 19,
			"tenants.acme.limits.workspace_bytes", "must be a positive number of bytes, got 0"},
		{"tenant negative", tenantLimits("      workspace_bytes: -5\n"), 19,
			"tenants.acme.limits.workspace_bytes", "must be a positive number of bytes, got -5"},
		{"tenant text", tenantLimits("      workspace_bytes: lots\n"), 19,
			"tenants.acme.limits.workspace_bytes", `expected an integer, got the string "lots"`},
		{"tenant typo", tenantLimits("      workspace_byte: 1024\n"), 19,
			"tenants.acme.limits.workspace_byte", `unknown key (did you mean "workspace_bytes"?)`},
		{"tenant limits that are no mapping", strings.Replace(goodYAML, "    workspace: var/workspaces/acme\n",
			"    workspace: var/workspaces/acme\n    limits: 1048576\n", 1), 18,
			"tenants.acme.limits", "expected a mapping, got the integer 1048576"},
		{"a global limit only the gateway has", tenantLimits("      max_body_bytes: 10\n"), 19,
			"tenants.acme.limits.max_body_bytes", "unknown key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, file := fixture(t, tt.yaml)
			cfg, err := Load(file)
			if err == nil {
				t.Fatalf("Load succeeded: %+v", cfg)
			}
			for _, ce := range configErrors(t, err) {
				if ce.File == file && ce.Key == tt.key && strings.Contains(ce.Problem, tt.problem) {
					if ce.Line != tt.line {
						t.Errorf("line = %d, want %d (%v)", ce.Line, tt.line, ce)
					}
					return
				}
			}
			t.Errorf("no error with key %q and problem containing %q; got:\n%v", tt.key, tt.problem, err)
		})
	}
}

func TestWorkspaceBytesDefaultsAndOverrides(t *testing.T) {
	_, file := fixture(t, goodYAML)
	cfg, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Limits.WorkspaceBytes != 1<<30 || cfg.WorkspaceBytes("acme") != 1073741824 {
		t.Errorf("default: limits.workspace_bytes = %d, acme's = %d; want 1073741824", cfg.Limits.WorkspaceBytes, cfg.WorkspaceBytes("acme"))
	}

	y := strings.Replace(goodYAML, "    workspace: var/workspaces/acme\n",
		"    workspace: var/workspaces/acme\n    limits:\n      workspace_bytes: 1048576\n  globex:\n    workspace: var/workspaces/globex\n    seed: seeds/demo\n", 1)
	_, file = fixture(t, y+"limits:\n  workspace_bytes: 0x20000000\n")
	if cfg, err = Load(file); err != nil {
		t.Fatal(err)
	}
	if got := cfg.WorkspaceBytes("acme"); got != 1048576 {
		t.Errorf("acme's own limit = %d, want 1048576", got)
	}
	if got := cfg.WorkspaceBytes("globex"); got != 512<<20 {
		t.Errorf("globex takes limits.workspace_bytes: %d, want %d", got, 512<<20)
	}

	// A Config built by hand falls back to the default.
	if got := (&Config{}).WorkspaceBytes("x"); got != DefaultWorkspaceBytes {
		t.Errorf("hand-built config: %d", got)
	}
}

// A missing workspace is fine where the gateway will create it as a btrfs
// subvolume (its parent folder is on btrfs), and nowhere else without a
// seed.
func TestMissingWorkspaceOnBtrfsLoads(t *testing.T) {
	mnt := quotatest.Btrfs(t, false)
	_, file := fixture(t, strings.Replace(goodYAML, "workspace: var/workspaces/acme", "workspace: "+mnt+"/acme", 1))
	if _, err := Load(file); err != nil {
		t.Fatalf("a missing workspace whose parent is on btrfs: %v", err)
	}
	_, file = fixture(t, strings.Replace(goodYAML, "workspace: var/workspaces/acme", "workspace: "+mnt+"/no/acme", 1))
	_, err := Load(file)
	if err == nil || !strings.Contains(err.Error(), "tenants.acme.workspace: directory "+mnt+"/no/acme does not exist (a missing workspace is created at start only from a seed, or as a btrfs subvolume when its parent folder is on btrfs)") {
		t.Fatalf("a missing workspace whose parent is missing: %v", err)
	}
}
