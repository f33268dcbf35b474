package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/tools"
)

// testEnv opens a fresh workspace in a temp dir and returns the env and
// the host dir (for arranging files and checking effects).
func testEnv(t testing.TB) (*tools.Env, string) {
	t.Helper()
	dir := t.TempDir()
	ws, err := tools.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return &tools.Env{Tenant: "acme", SessionID: "s-1", Workspace: ws}, dir
}

// writeFiles creates files (path → content) below dir, with parents.
func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func symlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func readHost(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// call prepares and runs a tool with its own limits.
func call(t testing.TB, tool tools.Tool, env *tools.Env, args map[string]any) (tools.Result, error) {
	t.Helper()
	plan, err := tool.Prepare(context.Background(), env, args)
	if err != nil {
		t.Fatalf("prepare %s %v: %v", tool.Spec().Name, args, err)
	}
	return tool.Run(context.Background(), env, plan.Artifact, tool.Spec().Limits)
}

// mustCall is call that fails the test on a run error.
func mustCall(t testing.TB, tool tools.Tool, env *tools.Env, args map[string]any) tools.Result {
	t.Helper()
	res, err := call(t, tool, env, args)
	if err != nil {
		t.Fatalf("run %s %v: %v", tool.Spec().Name, args, err)
	}
	return res
}

func mustPrepare(t testing.TB, tool tools.Tool, env *tools.Env, args map[string]any) tools.Plan {
	t.Helper()
	plan, err := tool.Prepare(context.Background(), env, args)
	if err != nil {
		t.Fatalf("prepare %s %v: %v", tool.Spec().Name, args, err)
	}
	return plan
}

func wantArgError(t testing.TB, err error, pointer string) *tools.ArgError {
	t.Helper()
	var ae *tools.ArgError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v (%T), want *tools.ArgError", err, err)
	}
	if ae.Pointer != pointer {
		t.Fatalf("ArgError pointer = %q, want %q (rule %q)", ae.Pointer, pointer, ae.Rule)
	}
	return ae
}

func wantModelError(t testing.TB, err error, contains string) {
	t.Helper()
	var me *tools.ModelError
	if !errors.As(err, &me) {
		t.Fatalf("err = %v (%T), want *tools.ModelError", err, err)
	}
	if !strings.Contains(me.Message, contains) {
		t.Fatalf("ModelError %q does not contain %q", me.Message, contains)
	}
}

func wantChanged(t testing.TB, err error) {
	t.Helper()
	if !errors.Is(err, tools.ErrTargetChanged) {
		t.Fatalf("err = %v, want one wrapping tools.ErrTargetChanged", err)
	}
	var me *tools.ModelError
	var ae *tools.ArgError
	if errors.As(err, &me) || errors.As(err, &ae) {
		t.Fatalf("a changed target must not be model-facing feedback: %v", err)
	}
}

func asModel(err error, me **tools.ModelError) bool { return errors.As(err, me) }
