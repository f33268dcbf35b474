package shell

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/tools"
)

// newTestShell returns a shell whose Close runs at cleanup.
func newTestShell(t testing.TB, opts Options) *Shell {
	t.Helper()
	if opts.Getenv == nil {
		opts.Getenv = func(name string) string {
			switch name {
			case "LANG":
				return "C.UTF-8"
			case "SECRET_VAR":
				return "hunter2"
			}
			return ""
		}
	}
	if opts.Runner == nil && opts.Withheld == "" {
		opts.Runner = JailRunner{Jailer: testJailer(t)}
	}
	sh, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sh.Close() })
	return sh
}

// testEnv opens a fresh workspace and returns the env and its host dir.
func testEnv(t testing.TB, tenant, session string) (*tools.Env, string) {
	t.Helper()
	dir := t.TempDir()
	ownWorkspace(t, dir)
	ws, err := tools.OpenWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return &tools.Env{Tenant: tenant, SessionID: session, Workspace: ws}, dir
}

// sameWorkspace returns an env of another tenant/session on the same
// workspace.
func otherEnv(env *tools.Env, tenant, session string) *tools.Env {
	return &tools.Env{Tenant: tenant, SessionID: session, Workspace: env.Workspace}
}

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
	ownWorkspace(t, dir)
}

// ownWorkspace gives the jail's user the workspace at dir, as the gateway
// does at start.
func ownWorkspace(t testing.TB, dir string) {
	t.Helper()
	if err := testJailer(t).OwnWorkspace(dir); err != nil {
		t.Fatal(err)
	}
}

// bashTool returns the shell's bash tool.
func bashTool(sh *Shell) tools.Tool { return sh.Tools()[0] }

func mustPrepare(t testing.TB, tool tools.Tool, env *tools.Env, args map[string]any) tools.Plan {
	t.Helper()
	plan, err := tool.Prepare(context.Background(), env, args)
	if err != nil {
		t.Fatalf("prepare %s %v: %v", tool.Spec().Name, args, err)
	}
	return plan
}

// runBash prepares and runs command with the tool's own limits.
func runBash(t testing.TB, sh *Shell, env *tools.Env, args map[string]any) tools.Result {
	t.Helper()
	tool := bashTool(sh)
	plan := mustPrepare(t, tool, env, args)
	lim := tool.Spec().Limits
	ctx, cancel := context.WithTimeout(context.Background(), lim.Timeout)
	defer cancel()
	res, err := tool.Run(ctx, env, plan.Artifact, lim)
	if err != nil {
		t.Fatalf("run bash %v: %v", args, err)
	}
	return res
}

// argErr asserts err is an *tools.ArgError with pointer and a rule
// containing rule.
func argErr(t testing.TB, err error, pointer, rule string) {
	t.Helper()
	var ae *tools.ArgError
	if !errors.As(err, &ae) {
		t.Fatalf("got %v (%T), want *tools.ArgError", err, err)
	}
	if ae.Pointer != pointer || !strings.Contains(ae.Rule, rule) {
		t.Fatalf("got ArgError{%q, %q}, want pointer %q rule containing %q", ae.Pointer, ae.Rule, pointer, rule)
	}
}

// commandResource returns the single command resource of a plan.
func commandResource(t testing.TB, plan tools.Plan) tools.Resource {
	t.Helper()
	if len(plan.Resources) == 0 || plan.Resources[0]["type"] != "command" {
		t.Fatalf("the first resource must be the command: %v", plan.Resources)
	}
	n := len(plan.Resources)
	for _, r := range plan.Resources[1 : n-1] {
		arg := r["access"] == "command" || r["access"] == "write"
		redirect := r["redirect"] == true && (r["access"] == "read" || r["access"] == "write")
		if r["type"] != "file" || !(arg || redirect) {
			t.Fatalf("resources after the command must be its argument and redirect files: %v", r)
		}
	}
	if last := plan.Resources[n-1]; n < 2 || last["type"] != "file" || last["access"] != "list" || last["path"] != plan.Resources[0]["cwd"] {
		t.Fatalf("the last resource must be the working folder, access list: %v", plan.Resources)
	}
	return plan.Resources[0]
}

// assertNoStrays fails when processes whose command line contains marker
// are still alive. A process SIGKILLed a moment ago may take a little while
// to exit, so it polls for a few seconds; a real stray lives far longer.
func assertNoStrays(t testing.TB, marker string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s := strayProcesses(t, marker)
		if len(s) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("stray processes: %v", s)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// strayProcesses lists processes whose command line contains marker.
func strayProcesses(t testing.TB, marker string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc")
	}
	var found []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(b) == 0 {
			continue // gone, or a zombie
		}
		if strings.Contains(string(b), marker) {
			found = append(found, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return found
}

// symlinkAt creates dir/name pointing at target.
func symlinkAt(target, dir, name string) error {
	return os.Symlink(target, filepath.Join(dir, name))
}

// argumentPaths lists the argument file resources of a bash plan (not the
// command, not the working folder) as "path", "!path" for outside ones and
// "w:path" for access write, with "#N" appended for links: N.
func argumentPaths(plan tools.Plan) []string {
	var got []string
	for _, r := range plan.Resources[1:] {
		if r["type"] != "file" || r["access"] == "list" {
			continue
		}
		p := r["path"].(string)
		if r["outside"] == true {
			p = "!" + p
		}
		if r["access"] == "write" {
			p = "w:" + p
		}
		if n, ok := r["links"]; ok {
			p += fmt.Sprintf("#%v", n)
		}
		got = append(got, p)
	}
	return got
}
