package gateway

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgate/toolgate/internal/pgtest"
)

// /readyz says the audit store is unready while its commits fail (it used
// to say ok while every commit failed with "disk full"), and ready again
// once a write succeeds, without any call having to arrive first: an
// unready replica gets no traffic to prove itself with.
func TestReadinessFollowsFailingCommits(t *testing.T) {
	t.Parallel()
	const full = "database or disk is full"
	for _, tc := range []struct {
		name string
		// audit returns the audit section and a way to make every write
		// of the database fail from outside the gateway (and to heal it).
		audit func(t *testing.T) (yaml string, fail func(h *harness) (heal func()))
	}{
		{"sqlite", func(t *testing.T) (string, func(*harness) func()) {
			return "", func(h *harness) func() {
				db, err := sql.Open("sqlite", filepath.Join(h.dir, "audit.db"))
				must(t, err)
				t.Cleanup(func() { db.Close() })
				for _, q := range []string{
					`CREATE TRIGGER full_events BEFORE INSERT ON audit_append BEGIN SELECT RAISE(ABORT, '` + full + `'); END`,
					`CREATE TRIGGER full_probe_i BEFORE INSERT ON store_probe BEGIN SELECT RAISE(ABORT, '` + full + `'); END`,
					`CREATE TRIGGER full_probe_u BEFORE UPDATE ON store_probe BEGIN SELECT RAISE(ABORT, '` + full + `'); END`,
				} {
					_, err := db.Exec(q)
					must(t, err)
				}
				return func() {
					for _, tr := range []string{"full_events", "full_probe_i", "full_probe_u"} {
						_, err := db.Exec(`DROP TRIGGER ` + tr)
						must(t, err)
					}
				}
			}
		}},
		{"postgres", func(t *testing.T) (string, func(*harness) func()) {
			dsn := pgtest.DSN(t)
			return fmt.Sprintf("  driver: postgres\n  dsn: %q\n", dsn), func(*harness) func() {
				c, err := pgx.Connect(t.Context(), dsn)
				must(t, err)
				t.Cleanup(func() { c.Close(context.Background()) })
				_, err = c.Exec(t.Context(), `CREATE FUNCTION full_disk() RETURNS trigger LANGUAGE plpgsql AS
					$$ BEGIN RAISE EXCEPTION '`+full+`'; END $$;
					CREATE TRIGGER full_events BEFORE INSERT ON audit_append FOR EACH ROW EXECUTE FUNCTION full_disk();
					CREATE TRIGGER full_probe BEFORE INSERT OR UPDATE ON store_probe FOR EACH ROW EXECUTE FUNCTION full_disk()`)
				must(t, err)
				return func() {
					_, err := c.Exec(context.Background(), `DROP TRIGGER full_events ON audit_append; DROP TRIGGER full_probe ON store_probe`)
					must(t, err)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml, fail := tc.audit(t)
			h := start(t, func(s *setup) { s.auditYAML = yaml })
			dev := h.token("acme", "alice", "developer")
			readyz := func() (int, string) {
				r := h.do("GET", "/readyz", "", nil)
				return r.status, r.body["checks"].(map[string]any)["audit"].(string)
			}
			if r := h.call(dev, "read-file", `{"arguments":{"path":"docs/guide.md"}}`); r.str("outcome") != "ok" {
				t.Fatalf("warm-up: %s", r.raw)
			}
			if code, audit := readyz(); code != 200 || audit != "ok" {
				t.Fatalf("readyz before the fault: %d %s", code, audit)
			}

			heal := fail(h)
			before := h.snapshot()
			if r := h.call(dev, "write-file", `{"arguments":{"path":"notes/x","content":"x"}}`); r.status != 503 || r.errCode() != "unavailable" {
				t.Fatalf("call while commits fail: %d %s", r.status, r.raw)
			}
			h.assertUnchanged(before)
			for range 2 { // the probe of each readiness check fails too
				if code, audit := readyz(); code != 503 || audit != "commits failing" {
					t.Fatalf("readyz while commits fail: %d %q, want 503 \"commits failing\"", code, audit)
				}
			}

			// The disk has room again: the next readiness check's probe
			// sees it, before any call arrives.
			heal()
			deadline := time.Now().Add(10 * time.Second)
			for {
				code, audit := readyz()
				if code == 200 && audit == "ok" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("readyz after healing: %d %s", code, audit)
				}
				time.Sleep(20 * time.Millisecond)
			}
			if r := h.call(dev, "read-file", `{"arguments":{"path":"docs/guide.md"}}`); r.str("outcome") != "ok" {
				t.Fatalf("call after healing: %d %s", r.status, r.raw)
			}
			auditor := h.token("acme", "carol", "auditor")
			if r := h.do("GET", "/v1/audit/verify", auditor, nil); r.status != 200 || r.body["ok"] != true {
				t.Fatalf("verify after the outage: %s", r.raw)
			}
		})
	}
}
