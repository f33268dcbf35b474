package shell

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/command"
	"github.com/toolgate/toolgate/internal/sandbox"
	"github.com/toolgate/toolgate/internal/tools"
)

func TestBashReturnsOutputAndExitCode(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, dir := testEnv(t, "acme", "s-1")
	writeFiles(t, dir, map[string]string{"sub/a.txt": "one\ntwo\n"})
	cases := []struct {
		name, command, cwd string
		content            string
		exit               float64
	}{
		{"builtin echo", "echo hi", "", "hi\n[exit code: 0]", 0},
		{"executed program", "printf 'a\\nb\\n'", "", "a\nb\n[exit code: 0]", 0},
		{"pipeline of programs", "cat sub/a.txt | wc -l", "", "2\n[exit code: 0]", 0},
		{"non-zero exit is a result", "false", "", "[exit code: 1]", 1},
		{"exit status of a program", "sh -c 'echo out; echo err >&2; exit 3'", "", "out\nerr\n[exit code: 3]", 3},
		{"missing newline is added before the exit line", "printf x", "", "x\n[exit code: 0]", 0},
		{"cwd is the working folder", "ls", "sub", "a.txt\n[exit code: 0]", 0},
		{"unknown program", "no-such-program-xyz", "", "no-such-program-xyz: command not found\n[exit code: 127]", 127},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := map[string]any{"command": c.command}
			if c.cwd != "" {
				args["cwd"] = c.cwd
			}
			res := runBash(t, sh, env, args)
			if res.Content != c.content {
				t.Errorf("content = %q, want %q", res.Content, c.content)
			}
			if res.Data["exit_code"] != c.exit || res.Data["timed_out"] != false || res.Data["truncated"] != false {
				t.Errorf("data = %v", res.Data)
			}
		})
	}
}

func TestBashOutputKeepsHeadAndTailWithNotice(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, _ := testEnv(t, "acme", "s-1")
	tool := bashTool(sh)
	// 20000 numbered lines, about 110 KB, through a real program.
	plan := mustPrepare(t, tool, env, map[string]any{
		"command": `sh -c 'i=0; while [ $i -lt 20000 ]; do echo "line $i"; i=$((i+1)); done'`})
	lim := tool.Spec().Limits
	lim.MaxOutputBytes = 4096 // as a policy obligation would tighten it
	res, err := tool.Run(context.Background(), env, plan.Artifact, lim)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Content) > lim.MaxOutputBytes {
		t.Errorf("content is %d bytes, cap %d", len(res.Content), lim.MaxOutputBytes)
	}
	if !strings.HasPrefix(res.Content, "line 0\nline 1\n") {
		t.Errorf("head lost: %q", res.Content[:40])
	}
	if !strings.HasSuffix(res.Content, "line 19999\n[exit code: 0]") {
		t.Errorf("tail lost: %q", res.Content[len(res.Content)-40:])
	}
	if !strings.Contains(res.Content, " bytes omitted ...]\n") || !res.Truncated || res.Data["truncated"] != true {
		t.Errorf("no omission notice or flag: truncated=%v data=%v", res.Truncated, res.Data)
	}
	var total int
	for i := range 20000 {
		total += len(fmt.Sprintf("line %d\n", i))
	}
	if res.Bytes != total {
		t.Errorf("Bytes = %d, want %d", res.Bytes, total)
	}
}

func TestBashTimeoutKillsEveryProcessAndLeavesNoStrays(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, _ := testEnv(t, "acme", "s-1")
	marker := fmt.Sprintf("30.%06d", rand.IntN(1000000))
	cmd := fmt.Sprintf("sh -c 'sleep %s & sleep %s & echo started; wait'; sleep %s & wait", marker, marker, marker)
	res := runBash(t, sh, env, map[string]any{"command": cmd, "timeout_ms": float64(5000)})
	if res.Content != "started\n[timed out after 5s; every process of the command killed]\n[exit code: 124]" {
		t.Errorf("content = %q", res.Content)
	}
	if res.Data["timed_out"] != true || res.Data["exit_code"] != float64(124) {
		t.Errorf("data = %v", res.Data)
	}
	assertNoStrays(t, marker)
}

func TestBashKillsWhatAProgramLeftBehind(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, _ := testEnv(t, "acme", "s-1")
	marker := fmt.Sprintf("31.%06d", rand.IntN(1000000))
	// sleep is approved (its own segment), so sh may start it.
	res := runBash(t, sh, env, map[string]any{"command": fmt.Sprintf("sh -c 'sleep %s > /dev/null & echo left' || sleep 0", marker)})
	if res.Content != "left\n[exit code: 0]" {
		t.Errorf("content = %q", res.Content)
	}
	assertNoStrays(t, marker)
}

func TestBashTimeoutFollowsTheTightenedLimit(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, _ := testEnv(t, "acme", "s-1")
	tool := bashTool(sh)
	plan := mustPrepare(t, tool, env, map[string]any{"command": "sleep 20"}) // default 30 s
	lim := tool.Spec().Limits
	lim.Timeout = time.Second // tightened by an obligation
	res, err := tool.Run(context.Background(), env, plan.Artifact, lim)
	if err != nil {
		t.Fatal(err)
	}
	// A tenth of the limit is kept back to kill the group and report
	// before the caller's deadline.
	if res.Data["timed_out"] != true || !strings.Contains(res.Content, "[timed out after 0.9s;") {
		t.Errorf("content %q data %v", res.Content, res.Data)
	}
}

func TestBashCancelKillsAndFails(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, _ := testEnv(t, "acme", "s-1")
	tool := bashTool(sh)
	marker := fmt.Sprintf("32.%06d", rand.IntN(1000000))
	plan := mustPrepare(t, tool, env, map[string]any{"command": "sleep " + marker})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := tool.Run(ctx, env, plan.Artifact, tool.Spec().Limits)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	assertNoStrays(t, marker)
}

func TestBashEnvironmentIsTheAllowlist(t *testing.T) {
	t.Setenv("SECRET_VAR", "hunter2")
	sh := newTestShell(t, Options{Getenv: os.Getenv})
	env, dir := testEnv(t, "acme", "s-1")
	res := runBash(t, sh, env, map[string]any{"command": "env"})
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(res.Content, "\n[exit code: 0]"), "\n") {
		k, v, _ := strings.Cut(line, "=")
		got[k] = v
	}
	if _, ok := got["SECRET_VAR"]; ok || strings.Contains(res.Content, "hunter2") {
		t.Errorf("gateway variable leaked: %q", res.Content)
	}
	// HOME is the workspace as the command sees it; nothing names the
	// host's folder.
	if got["PATH"] != DefaultPath || got["HOME"] != sandbox.DefaultMountAt || got["TERM"] != "dumb" || strings.Contains(res.Content, dir) {
		t.Errorf("env = %v", got)
	}
	if got["GIT_CEILING_DIRECTORIES"] != path.Dir(sandbox.DefaultMountAt) || got["GIT_CONFIG_NOSYSTEM"] != "1" {
		t.Errorf("git is not kept inside the workspace: env = %v", got)
	}
	for k := range got {
		switch k {
		case "PATH", "HOME", "TERM", "LANG", "LC_ALL", "TZ", "PWD", "SHLVL", "_", "OLDPWD",
			"GIT_CEILING_DIRECTORIES", "GIT_CONFIG_NOSYSTEM":
		default:
			t.Errorf("unexpected variable %s", k)
		}
	}
}

func TestBashScriptCannotRedirectProgramLookupOrLoader(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, dir := testEnv(t, "acme", "s-1")
	writeFiles(t, dir, map[string]string{"bin/ls": "#!/bin/sh\necho hijacked\n"})
	os.Chmod(filepath.Join(dir, "bin/ls"), 0o755)
	res := runBash(t, sh, env, map[string]any{"command": "export PATH=./bin LD_PRELOAD=x.so; ls bin; sh -c 'echo ${LD_PRELOAD:-none}'"})
	if strings.Contains(res.Content, "hijacked") {
		t.Errorf("PATH assigned by the script chose the program: %q", res.Content)
	}
	if !strings.Contains(res.Content, "none\n") {
		t.Errorf("LD_PRELOAD reached a program: %q", res.Content)
	}
}

func TestBashRefusesWhatPolicyDidNotSee(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, dir := testEnv(t, "acme", "s-1")
	writeFiles(t, dir, map[string]string{"a.go": "", "b.go": "", "c.txt": "", "script.sh": "id\n"})
	cases := []struct {
		name     string
		command  string
		contains []string
		absent   []string
		refused  []any
		exit     float64
	}{
		{"program chosen by a variable", "for c in echo id; do $c hi; done",
			[]string{"hi\n", command.RefusedNotice}, nil, []any{"id"}, 126},
		{"eval runs only approved programs", `eval "rm -rf x"`,
			[]string{command.RefusedNotice}, nil, []any{"rm"}, 126},
		{"eval not itself approved", `E=eval; $E ls`,
			[]string{command.RefusedNotice}, nil, []any{"eval"}, 126},
		{"source of a workspace script", "source ./script.sh",
			[]string{command.RefusedNotice}, nil, []any{"id"}, 126},
		{"builtin wrapper", "X=builtin; $X eval ls", []string{command.RefusedNotice}, nil, []any{"builtin"}, 126},
		{"command wrapper runs its approved operand", "command true", nil, []string{command.RefusedNotice}, []any{}, 0},
		{"exec wrapper runs its approved operand", "exec printf ok", []string{"ok"}, []string{command.RefusedNotice}, []any{}, 0},
		{"substituted argument is not the approved one", "ls $(echo /)",
			[]string{command.RefusedNotice}, nil, []any{"ls"}, 126},
		{"substituted program that is approved runs", "echo $(printf hi)", []string{"hi\n"}, []string{command.RefusedNotice}, []any{}, 0},
		{"glob expands to matching files", "ls *.go", []string{"a.go\nb.go\n"}, []string{command.RefusedNotice}, []any{}, 0},
		{"brace expansion expands as approved", "ls {a,b}.go", []string{"a.go\nb.go\n"}, []string{command.RefusedNotice}, []any{}, 0},
		{"tilde is the workspace", "ls ~", []string{"a.go\n"}, []string{command.RefusedNotice}, []any{}, 0},
		{"function body is checked", "f() { $1 hi; }; f id", []string{command.RefusedNotice}, nil, []any{"id"}, 126},
		{"approved function body runs", "f() { ls a.go; }; f", []string{"a.go\n"}, []string{command.RefusedNotice}, []any{}, 0},
		// The EXIT trap does not change the exit status, as in Bash.
		{"trap runs only approved programs", "trap id EXIT; true", []string{command.RefusedNotice}, nil, []any{"id"}, 0},
		{"expanded host path is not shown", "$HOME/bin/tool", []string{command.RefusedNotice}, nil, []any{"~/bin/tool"}, 126},
		{"cd out of the workspace", "cd / && ls", []string{command.RefusedDirNotice}, nil, []any{"ls"}, 126},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := runBash(t, sh, env, map[string]any{"command": c.command})
			for _, s := range c.contains {
				if !strings.Contains(res.Content, s) {
					t.Errorf("content %q lacks %q", res.Content, s)
				}
			}
			for _, s := range c.absent {
				if strings.Contains(res.Content, s) {
					t.Errorf("content %q has %q", res.Content, s)
				}
			}
			if !reflect.DeepEqual(res.Data["refused"], c.refused) || res.Data["exit_code"] != c.exit {
				t.Errorf("refused = %v exit = %v, want %v %v (content %q)", res.Data["refused"], res.Data["exit_code"], c.refused, c.exit, res.Content)
			}
		})
	}
}

// A child of an approved program is not seen by the interpreter (xargs
// execs echo itself), but the jail lets it run only a program of the
// decision: echo as a segment of its own makes /usr/bin/echo one.
func TestChildrenOfAnApprovedProgramRunOnlyApprovedPrograms(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, _ := testEnv(t, "acme", "s-1")
	res := runBash(t, sh, env, map[string]any{"command": "printf 'a b' | xargs echo got"})
	if !strings.Contains(res.Content, "Permission denied") || res.Data["exit_code"] == float64(0) {
		t.Errorf("xargs started a program nothing approved: %q", res.Content)
	}
	res = runBash(t, sh, env, map[string]any{"command": "printf 'a b' | xargs echo got; echo done"})
	if res.Content != "got a b\ndone\n[exit code: 0]" {
		t.Errorf("content = %q", res.Content)
	}
}

// Redirections are opened by the interpreter inside the jail, never by the
// gateway: a target outside the workspace is refused there (and policy saw
// it as "outside"), a symlink out of the workspace leads nowhere (the host
// does not exist in the jail), and nothing is written outside.
func TestBashRedirectsStayInsideTheWorkspace(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, dir := testEnv(t, "acme", "s-1")
	outside := t.TempDir()
	if err := symlinkAt(outside, dir, "link"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, command string
		ok            bool
	}{
		{"absolute target", "echo x > " + filepath.Join(outside, "a"), false},
		{"climbing target", "echo x > ../" + filepath.Base(outside) + "/b", false},
		{"through a symlink", "echo x > link/c", false},
		{"input from outside", "cat < /etc/hostname", false},
		{"inside", "echo x > inside.txt", true},
		{"inside by the jail's absolute path", "echo y > " + sandbox.DefaultMountAt + "/inside2.txt", true},
		{"dev null", "echo x > /dev/null", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := runBash(t, sh, env, map[string]any{"command": c.command})
			if ok := res.Data["exit_code"] == float64(0); ok != c.ok {
				t.Errorf("content = %q", res.Content)
			}
			if strings.Contains(res.Content, dir) {
				t.Errorf("the workspace's host path in the output: %q", res.Content)
			}
		})
	}
	if entries, _ := os.ReadDir(outside); len(entries) > 0 {
		t.Errorf("files written outside: %v", entries)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "inside.txt")); string(b) != "x\n" {
		t.Errorf("inside.txt = %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "inside2.txt")); string(b) != "y\n" {
		t.Errorf("inside2.txt = %q", b)
	}
}

// Globs are expanded by the interpreter inside the jail: they list the
// jail's view, where nothing of the host but the system folders exists.
func TestBashGlobsListOnlyTheJail(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, _ := testEnv(t, "acme", "s-1")
	res := runBash(t, sh, env, map[string]any{"command": "echo /root/* /etc/*"})
	if !strings.HasPrefix(res.Content, "/root/* ") || strings.Contains(res.Content, "shadow") || !strings.Contains(res.Content, "/etc/passwd") {
		t.Errorf("content = %q", res.Content)
	}
}

// recordingRunner wraps the test jail: it sees every command the shell
// starts (one jail per command, not per program) and can refuse one.
type recordingRunner struct {
	JailRunner
	seen   atomic.Int32
	refuse string
}

func (r *recordingRunner) Start(c Confinement, spec []byte, stdin, out *os.File) (*sandbox.Running, error) {
	var s command.Spec
	if err := json.Unmarshal(spec, &s); err != nil {
		return nil, err
	}
	// The jail is built from the call: its workspace and the programs
	// resolved when it was prepared.
	if c.Workspace == "" || !slices.Contains(c.Programs, "/usr/bin/ls") || s.Source == "" || s.Digest == "" {
		return nil, errors.New("confinement does not name the command")
	}
	r.seen.Add(1)
	if strings.Contains(s.Source, r.refuse) {
		return nil, errors.New("refuse")
	}
	return r.JailRunner.Start(c, spec, stdin, out)
}

func TestRunnerSeesEveryCommandAndFailsClosed(t *testing.T) {
	r := &recordingRunner{JailRunner: JailRunner{Jailer: testJailer(t)}, refuse: "refuse-me"}
	sh := newTestShell(t, Options{Runner: r})
	env, dir := testEnv(t, "acme", "s-1")
	res := runBash(t, sh, env, map[string]any{"command": "true && ls | cat && echo builtin"})
	if res.Content != "builtin\n[exit code: 0]" || r.seen.Load() != 1 {
		t.Errorf("content = %q, runner calls = %d", res.Content, r.seen.Load())
	}
	tool := bashTool(sh)
	plan := mustPrepare(t, tool, env, map[string]any{"command": "ls refuse-me; touch after"})
	if _, err := tool.Run(context.Background(), env, plan.Artifact, tool.Spec().Limits); !errors.Is(err, errConfine) {
		t.Errorf("err = %v, want errConfine", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "after")); err == nil {
		t.Errorf("the command went on after confinement failed")
	}
}

func TestBashRunFailsWhenTheWorkingFolderChanged(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, dir := testEnv(t, "acme", "s-1")
	writeFiles(t, dir, map[string]string{"sub/x": ""})
	tool := bashTool(sh)
	plan := mustPrepare(t, tool, env, map[string]any{"command": "ls", "cwd": "sub"})
	os.RemoveAll(filepath.Join(dir, "sub"))
	if err := symlinkAt(t.TempDir(), dir, "sub"); err != nil {
		t.Fatal(err)
	}
	if _, err := tool.Run(context.Background(), env, plan.Artifact, tool.Spec().Limits); !errors.Is(err, tools.ErrTargetChanged) {
		t.Errorf("err = %v, want ErrTargetChanged", err)
	}
}

// TestGitDoesNotReadAnEnclosingRepository: a workspace inside someone
// else's repository (the gateway's own checkout, say) is not a repository:
// git must not climb out of it. A workspace that is a repository works.
func TestGitDoesNotReadAnEnclosingRepository(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	outer := t.TempDir()
	gitIn := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t", "-c", "safe.directory=*"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+outer)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	gitIn(outer, "init", "-q")
	writeFiles(t, outer, map[string]string{"gateway-secret.txt": "outer-secret", "ws/README.md": "hello"})
	ownWorkspace(t, filepath.Join(outer, "ws"))
	gitIn(outer, "add", "-A")
	gitIn(outer, "commit", "-qm", "outer-commit-marker")
	ws, err := tools.OpenWorkspace(filepath.Join(outer, "ws"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	env := &tools.Env{Tenant: "acme", SessionID: "s-1", Workspace: ws}
	sh := newTestShell(t, Options{})

	for _, command := range []string{"git status", "git log"} {
		res := runBash(t, sh, env, map[string]any{"command": command})
		if !strings.Contains(res.Content, "not a git repository") || strings.Contains(res.Content, "outer-commit-marker") ||
			strings.Contains(res.Content, "gateway-secret") || res.Data["exit_code"] == float64(0) {
			t.Errorf("%s in a workspace inside a repository: %q", command, res.Content)
		}
	}

	// The workspace as a repository of its own still works.
	gitIn(filepath.Join(outer, "ws"), "init", "-q")
	gitIn(filepath.Join(outer, "ws"), "add", "-A")
	gitIn(filepath.Join(outer, "ws"), "commit", "-qm", "inner-commit-marker")
	ownWorkspace(t, filepath.Join(outer, "ws"))
	res := runBash(t, sh, env, map[string]any{"command": "git log"})
	if !strings.Contains(res.Content, "inner-commit-marker") || strings.Contains(res.Content, "outer-commit-marker") {
		t.Errorf("git log in a workspace repository: %q", res.Content)
	}
}

// runBashWith prepares and runs command with the tool's limits changed by
// tighten (an obligation).
func runBashWith(t testing.TB, sh *Shell, env *tools.Env, args map[string]any, tighten func(*tools.Limits)) tools.Result {
	t.Helper()
	tool := bashTool(sh)
	plan := mustPrepare(t, tool, env, args)
	lim := tool.Spec().Limits
	tighten(&lim)
	ctx, cancel := context.WithTimeout(context.Background(), lim.Timeout)
	defer cancel()
	res, err := tool.Run(ctx, env, plan.Artifact, lim)
	if err != nil {
		t.Fatalf("run bash %v: %v", args, err)
	}
	return res
}

// A redirection opens only a regular file (or /dev/null): a FIFO is
// refused before it can block, whether it exists when the call is decided
// (the gateway only looks at it, never opens it) or appears on the way.
func TestRedirectsOpenOnlyRegularFiles(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, dir := testEnv(t, "acme", "s-1")
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o666); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"sub/x": ""})
	for _, c := range []string{"cat < fifo", "echo x > fifo", "echo x >> sub", "cat < sub"} {
		_, err := bashTool(sh).Prepare(context.Background(), env, map[string]any{"command": c})
		argErr(t, err, "/command", "is not a regular file")
	}
	res := runBash(t, sh, env, map[string]any{"command": "mkfifo f2; cat < f2; echo after", "timeout_ms": float64(20000)})
	if !strings.Contains(res.Content, "open f2: refused: not a regular file") || !strings.Contains(res.Content, "after") || res.Data["timed_out"] != false {
		t.Errorf("content = %q data %v", res.Content, res.Data)
	}
	if res.Data["refused_files"] != float64(1) {
		t.Errorf("refused_files = %v", res.Data["refused_files"])
	}
}

// Every call ends at its timeout, whatever it is blocked on: here a
// program opening a FIFO nobody writes.
func TestTimeoutEndsAProgramBlockedOnAFIFO(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, _ := testEnv(t, "acme", "s-1")
	res := runBash(t, sh, env, map[string]any{"command": "mkfifo f; cat f", "timeout_ms": float64(2000)})
	if res.Data["timed_out"] != true || res.Data["exit_code"] != float64(124) {
		t.Errorf("content = %q data %v", res.Content, res.Data)
	}
}

// Globs are expanded inside the jail, where a hidden path is an empty,
// unreadable mount: `echo s*/*` lists nothing of secrets/, and its files
// cannot be read under any name.
func TestGlobsDoNotListHiddenPaths(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, dir := testEnv(t, "acme", "s-1")
	writeFiles(t, dir, map[string]string{"secrets/db.env": "PASSWORD=hunter2\n", "src/a.go": "package a\n"})
	hide := func(l *tools.Limits) { l.ExcludePaths = []string{"secrets", "secrets/**"} }
	res := runBashWith(t, sh, env, map[string]any{"command": "echo s*/*; cat s*/*; cat secrets/db.env"}, hide)
	if res.Content != "src/a.go\npackage a\ncat: secrets/db.env: Permission denied\n[exit code: 1]" {
		t.Errorf("content = %q", res.Content)
	}
}

// A script of the workspace runs when it is an approved segment, its "#!"
// interpreter with it; a copy of it under another name is not approved.
func TestWorkspaceScriptsRunWithTheirInterpreter(t *testing.T) {
	sh := newTestShell(t, Options{})
	env, dir := testEnv(t, "acme", "s-1")
	writeFiles(t, dir, map[string]string{"run.sh": "#!/bin/sh\necho script-ran\n", "other.sh": "#!/bin/sh\necho other-ran\n"})
	for _, f := range []string{"run.sh", "other.sh"} {
		if err := os.Chmod(filepath.Join(dir, f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	res := runBash(t, sh, env, map[string]any{"command": "./run.sh"})
	if res.Content != "script-ran\n[exit code: 0]" {
		t.Errorf("content = %q", res.Content)
	}
	// run.sh approved does not make other.sh runnable, even by a program.
	res = runBash(t, sh, env, map[string]any{"command": "./run.sh; sh -c ./other.sh"})
	if strings.Contains(res.Content, "other-ran") {
		t.Errorf("an unapproved script ran: %q", res.Content)
	}
}
