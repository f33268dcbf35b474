package decision

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// With Tests, a folder whose own tests fail or error is rejected like one
// that does not compile: the previous revision serves on and Status says
// which tests failed.
func TestALoadThatFailsThePacksTestsIsRejected(t *testing.T) {
	dir := newPack(t, nil)
	tests := t.TempDir()
	writePack(t, tests, map[string]string{"authz_test.rego": `package t

test_read_allowed if data.toolgate.authz.decision.allow with input as {"tool": {"name": "read-file"}}

test_write_denied if not data.toolgate.authz.decision.allow with input as {"tool": {"name": "write-file"}}
`})
	ctx := context.Background()
	e := NewEngine(Options{Dir: dir, Tests: []string{tests}})
	if err := e.Load(ctx); err != nil {
		t.Fatalf("a pack that passes its tests: %v", err)
	}
	good, _ := e.Current()

	// A change that breaks a test: everything is allowed.
	writePack(t, dir, map[string]string{"authz.rego": "package toolgate.authz\n\ndecision := {\"allow\": true, \"reasons\": [\"open\"]}\n"})
	err := e.Load(ctx)
	var te *TestsError
	if !errors.As(err, &te) || !strings.Contains(te.Report, "data.t.test_write_denied: FAIL") || strings.Contains(te.Report, "test_read_allowed") {
		t.Fatalf("a pack that fails its tests: %v", err)
	}
	if cur, _ := e.Current(); cur.ID() != good.ID() {
		t.Fatalf("the failing pack serves: %s, want %s", cur.ID(), good.ID())
	}
	if st := e.Status(); !strings.Contains(st.LastError, "test_write_denied") {
		t.Fatalf("status: %+v", st)
	}

	// A test that errors (a conflict) rejects it too.
	writePack(t, dir, map[string]string{"authz.rego": "package toolgate.authz\n\nv := 1 if input.tool.name == \"write-file\"\n\nv := 2 if input.tool.name == \"write-file\"\n\ndecision := {\"allow\": v == 0, \"reasons\": [\"x\"]} if input.tool.name == \"write-file\"\n\ndecision := {\"allow\": true, \"reasons\": [\"r\"]} if input.tool.name == \"read-file\"\n"})
	if err := e.Load(ctx); !errors.As(err, &te) || !strings.Contains(te.Report, "test_write_denied") {
		t.Fatalf("a pack whose test errors: %v", err)
	}

	// Fixed, it loads, and the error clears.
	writePack(t, dir, map[string]string{"authz.rego": minimalAuthz + "\n# fixed\n"})
	if err := e.Load(ctx); err != nil {
		t.Fatalf("the fixed pack: %v", err)
	}
	if cur, _ := e.Current(); cur.ID() == good.ID() || e.Status().LastError != "" {
		t.Fatalf("the fixed pack does not serve: %s %+v", cur.ID(), e.Status())
	}

	// Without Tests, the same failing pack loads (the gate is opt-in).
	writePack(t, dir, map[string]string{"authz.rego": "package toolgate.authz\n\ndecision := {\"allow\": true, \"reasons\": [\"open\"]}\n"})
	if err := NewEngine(Options{Dir: dir}).Load(ctx); err != nil {
		t.Fatalf("without Tests: %v", err)
	}
}
