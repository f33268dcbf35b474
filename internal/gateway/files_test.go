package gateway

import (
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/config"
)

// Files the gateway creates on first start — the SQLite database with its
// -wal and -shm files, the development JWT secret, the assertion signing
// key — are readable by the gateway's user alone (0600), and the folders
// made for them too (0700). The layout is the shipped gateway.yaml's.
func TestFilesTheGatewayCreatesAreOwnerOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	must(t, os.CopyFS(filepath.Join(dir, "policies"), os.DirFS("../../policies")))
	must(t, os.MkdirAll(filepath.Join(dir, "ws", "acme"), 0o755))
	yaml := `listen: "127.0.0.1:0"
policy:
  dir: policies
audit:
  driver: sqlite
  dsn: var/db/audit.db
auth:
  jwt:
    hs256_secret_file: var/dev-jwt-secret
  assertion:
    signing_key_file: var/keys/assertion-key.pem
    issuer: toolgate
    ttl: 60s
tenants:
  acme:
    workspace: ws/acme
tools:
  builtin: [read-file, task-create, task-list]
`
	must(t, os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(yaml), 0o644))
	cfg, err := config.Load(filepath.Join(dir, "gateway.yaml"))
	must(t, err)
	g, err := New(t.Context(), cfg, slog.New(slog.DiscardHandler))
	must(t, err)
	defer g.Close()
	// A committed event, so that the WAL is in use.
	must(t, g.audit.Append(t.Context(), &audit.Event{Tenant: "acme", Phase: audit.PhaseDecision, Outcome: "allow"}))

	want := map[string]fs.FileMode{
		"var":                        0o700,
		"var/db":                     0o700,
		"var/keys":                   0o700,
		"var/db/audit.db":            0o600,
		"var/db/audit.db-wal":        0o600,
		"var/db/audit.db-shm":        0o600,
		"var/dev-jwt-secret":         0o600,
		"var/keys/assertion-key.pem": 0o600,
	}
	seen := map[string]bool{}
	must(t, filepath.WalkDir(filepath.Join(dir, "var"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		seen[rel] = true
		mode, listed := want[rel]
		if !listed {
			// Anything else the gateway put there must be as private.
			mode = 0o600
			if d.IsDir() {
				mode = 0o700
			}
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s has mode %v, want %v", rel, fi.Mode().Perm(), mode)
		}
		return nil
	}))
	for rel := range want {
		if !seen[rel] {
			t.Errorf("%s was not created", rel)
		}
	}
}
