package gateway

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/sandbox"
	"github.com/toolgate/toolgate/internal/sandbox/sandboxtest"
)

// The command jail attacked through the real HTTP server, as a tenant with
// the default developer role would, with the shipped pack and with a pack
// of our own: what an allowed or approved program can see, write, start and
// leave behind.

func needPython(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Fatalf("these attacks need /usr/bin/python3 (an approved interpreter): %v", err)
	}
}

// sort is allowed; --compress-program makes it run python3 on the file's
// lines, which would copy the gateway's HS256 secret (anyone holding it
// mints tokens for any tenant) into the workspace. python3 never starts.
func TestJailSortCompressProgramDoesNotRunPython(t *testing.T) {
	t.Parallel()
	needPython(t)
	secret := "" // filled once the harness exists
	h := start(t, withAllTools)
	secret = filepath.Join(h.dir, "secret")
	line := fmt.Sprintf("open('notes/pwned','a').write(open(%q).read())\n", secret)
	must(t, os.WriteFile(filepath.Join(h.dir, "ws/acme/notes/big.txt"), []byte(strings.Repeat(line, 20000)), 0o644))
	dev := h.token("acme", "mallory", "developer")
	r := h.bashCall(dev, "sort -S 1K --compress-program=python3 -T notes notes/big.txt -o notes/out", "")
	if r.str("outcome") != "ok" {
		t.Fatalf("the default pack should allow this sort (the jail is the guard): %s", r.raw)
	}
	if strings.Contains(r.str("content"), "[exit code: 0]") {
		t.Errorf("sort succeeded although its compressor may not start: %s", r.str("content"))
	}
	if _, err := os.Stat(filepath.Join(h.dir, "ws/acme/notes/pwned")); err == nil {
		t.Fatal("python3 ran under sort")
	}
	b, _ := os.ReadFile(secret)
	if strings.Contains(string(r.raw), strings.TrimSpace(string(b))) {
		t.Fatal("the gateway's secret leaked")
	}
}

// grep -r walks the whole workspace: protected files do not exist for it,
// whatever the argument scan saw.
func TestJailRecursiveGrepSkipsProtectedFiles(t *testing.T) {
	t.Parallel()
	h := start(t, withAllTools)
	dev := h.token("acme", "mallory", "developer")
	r := h.bashCall(dev, "grep -r PASS .", "")
	if r.str("outcome") != "ok" {
		t.Fatalf("grep -r: %s", r.raw)
	}
	if strings.Contains(string(r.raw), "acme-secret") {
		t.Fatalf("grep -r read a protected file: %s", r.raw)
	}
}

// python3 needs a human; once approved it runs as arbitrary code in the
// jail, and still cannot read the gateway's secret, its audit database,
// another tenant's workspace or the gateway's /proc, run as root, allocate
// 2.8 GB, fork 1,500 processes, or leave a detached child behind.
func TestJailApprovedCodeStaysInside(t *testing.T) {
	t.Parallel() // its own gateway, workspace and database; mostly waiting
	needPython(t)
	h := start(t, withAllTools)
	fifo := filepath.Join(h.dir, "ws/acme/notes/survivor")
	sandboxtest.MakeFIFO(t, fifo)
	mallory := h.token("acme", "mallory", "developer")
	bob := h.token("acme", "bob", "approver")
	script := fmt.Sprintf(`import os, time
def probe(name, path):
    try:
        with open(path, 'rb') as f:
            print(name, 'READ', f.read(40))
    except Exception as e:
        print(name, 'no', type(e).__name__)
probe('secret', %q)
probe('auditdb', %q)
probe('globex', %q)
probe('gwenv', '/proc/%d/environ')
probe('shadow', '/etc/shadow')
print('uid', os.getuid(), os.geteuid())
print('procs', len([p for p in os.listdir('/proc') if p.isdigit()]))
import sys
sys.stdout.flush()
pid = os.fork()
if pid == 0:
    try:
        b = b'x' * 2_800_000_000
        print('alloc READ', flush=True)
    finally:
        os._exit(0)
_, st = os.waitpid(pid, 0)
print('alloc no' if st != 0 else 'alloc ended', flush=True)
%s
n = 0
for i in range(1500):
    try:
        if os.fork() == 0:
            time.sleep(2)
            os._exit(0)
        n += 1
    except OSError:
        break
print('forked', n)
print('done')`,
		filepath.Join(h.dir, "secret"), filepath.Join(h.dir, "audit.db"),
		filepath.Join(h.dir, "ws/globex/docs/guide.md"), os.Getpid(), sandboxtest.SurvivorScript("notes/survivor"))
	r := h.bashCall(mallory, "python3 -c "+shellQuote(script), "")
	if r.str("outcome") != "approval_required" {
		t.Fatalf("python3 should wait for a human: %s", r.raw)
	}
	id, callID := approvalID(t, r), r.str("call_id")
	if ok := h.do("POST", "/v1/approvals/"+id+"/approve", bob, nil); ok.status != 200 || ok.str("outcome") != "ok" {
		t.Fatalf("approve: %d %.300s", ok.status, ok.raw)
	}
	p := h.do("GET", "/v1/calls/"+callID, mallory, nil)
	out := p.str("content")
	if p.str("outcome") != "ok" || !strings.Contains(out, "done") {
		t.Fatalf("approved python3: %.2000s", p.raw)
	}
	if strings.Contains(out, "READ") {
		t.Fatalf("approved code read what the jail hides or allocated 2.8 GB:\n%s", out)
	}
	for _, want := range []string{"secret no", "auditdb no", "globex no", "gwenv no", "shadow no", "alloc no"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "uid 0 ") {
		t.Errorf("runs as uid 0:\n%s", out)
	}
	var n int
	if i := strings.Index(out, "forked "); i < 0 {
		t.Errorf("no fork count:\n%s", out)
	} else if fmt.Sscanf(out[i:], "forked %d", &n); n > 128 {
		t.Errorf("forked %d processes, more than the default limit of 128", n)
	}
	if sandboxtest.FIFOHasReader(t, fifo) {
		t.Fatal("a setsid, double-forked child outlived the call")
	}
}

// A pack of our own that allows every command and shapes the jail only by
// obligations: hidden private/, writes only under out/, a tight memory and
// process limit.
func ownJailPack(t testing.TB) func(*setup) {
	return func(s *setup) {
		s.policy = func(dir string) {
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				must(t, os.RemoveAll(filepath.Join(dir, e.Name())))
			}
			must(t, os.WriteFile(filepath.Join(dir, "allow.rego"), []byte("package toolgate.availability\n\nallow := true\n"), 0o644))
			must(t, os.WriteFile(filepath.Join(dir, "authz.rego"), []byte(`package toolgate.authz

decision := {
	"allow": true,
	"reasons": ["own pack: every command, shaped by the jail"],
	"obligations": {
		"exclude_paths": ["private", "private/**"],
		"write_paths": ["out/**"],
		"memory_bytes": 268435456,
		"max_processes": 16,
	},
}
`), 0o644))
		}
		s.files = map[string]string{
			"acme/private/key": "PRIVATE KEY\n",
			"acme/out/.keep":   "",
			"acme/in.txt":      "b\na\n",
		}
	}
}

func TestJailObligationsOfAnOwnPack(t *testing.T) {
	t.Parallel()
	needPython(t)
	h := start(t, withAllTools, ownJailPack(t))
	dev := h.token("acme", "mallory", "anyone")
	// Where the jail has a memory cgroup the OOM killer ends the hog and
	// the result says so; elsewhere its allocation fails.
	memWant := "MemoryError"
	conf, _ := h.do("GET", "/readyz", "", nil).body["confinement"].(map[string]any)
	if conf["memory"] == "jail" {
		memWant = "[killed: memory limit]"
	}
	cases := []struct{ cmd, want string }{
		{"cat private/key", "Permission denied"},
		{"ls private", "Permission denied"},
		{"sort -o in.txt in.txt", "Read-only file system"},
		{"sort -oin.txt in.txt", "Read-only file system"},
		{"sort --output=docs/guide.md in.txt", "Read-only file system"},
		{"sort -o out/sorted in.txt", "[exit code: 0]"},
		{"python3 -c " + shellQuote("b = b'x' * (512 * 1024 * 1024)"), memWant},
		{"python3 -c " + shellQuote("import os\nn = 0\ntry:\n    while n < 200:\n        os.fork() or os._exit(0)\n        n += 1\nexcept OSError:\n    pass\nprint('forked', n)"), "forked"},
	}
	for _, c := range cases {
		r := h.bashCall(dev, c.cmd, "")
		if r.str("outcome") != "ok" || !strings.Contains(r.str("content"), c.want) {
			t.Errorf("%s: %s %q, want content with %q", c.cmd, r.str("outcome"), r.str("content"), c.want)
		}
		if strings.Contains(string(r.raw), "PRIVATE KEY") {
			t.Fatalf("%s: hidden file leaked", c.cmd)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(h.dir, "ws/acme/in.txt")); string(b) != "b\na\n" {
		t.Errorf("in.txt changed: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(h.dir, "ws/acme/out/sorted")); string(b) != "a\nb\n" {
		t.Errorf("out/sorted = %q", b)
	}
}

// What must keep working inside the jail: git log in a repository, sort -o
// into a write path, go test on a small module (the Go toolchain granted by
// the default pack's exec_paths, its cache under the workspace's .cache).
func TestJailHappyPaths(t *testing.T) {
	t.Parallel() // its own gateway, workspace and database; mostly waiting
	// The gateway binary builds these jails itself (go run ./cmd/gateway
	// has no helper beside it).
	h := start(t, withAllTools, withGatewayHelper, func(s *setup) {
		s.files = map[string]string{
			"acme/src/mod/go.mod":    "module example.com/mod\n\ngo 1.22\n",
			"acme/src/mod/a.go":      "package mod\n\nfunc Two() int { return 2 }\n",
			"acme/src/mod/a_test.go": "package mod\n\nimport \"testing\"\n\nfunc TestTwo(t *testing.T) {\n\tif Two() != 2 {\n\t\tt.Fatal(\"two\")\n\t}\n}\n",
		}
	})
	ws := filepath.Join(h.dir, "ws/acme")
	git := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", ws, "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "safe.directory=*"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	git("init", "-q")
	git("add", "docs")
	git("commit", "-q", "-m", "first commit")
	dev := h.token("acme", "alice", "developer")
	if r := h.bashCall(dev, "git log --oneline", ""); r.str("outcome") != "ok" || !strings.Contains(r.str("content"), "first commit") {
		t.Fatalf("git log: %s", r.raw)
	}
	// Warm the build cache the jail will use (HOME is the workspace), so
	// the call is not a cold build of the standard library.
	warm := exec.Command("go", "test", "./...")
	warm.Dir = filepath.Join(ws, "src/mod")
	warm.Env = append(os.Environ(), "GOCACHE="+filepath.Join(ws, ".cache/go-build"), "GOFLAGS=", "GOTOOLCHAIN=local")
	if out, err := warm.CombinedOutput(); err != nil {
		t.Fatalf("warming the cache: %v %s", err, out)
	}
	// What root wrote into the workspace is the jail user's again, as the
	// gateway makes it at start.
	uid, gid := h.g.jail.jailer.UID()
	must(t, sandbox.ChownTree(ws, uid, gid))
	r := h.bashCall(dev, "go test ./...", "src/mod")
	if r.str("outcome") != "ok" || !strings.Contains(r.str("content"), "ok  \texample.com/mod") {
		t.Fatalf("go test in the jail: %s", r.raw)
	}
}

// shellQuote quotes s as one shell word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Fail closed: when the jail cannot be built (here its helper is a program
// that does not build one), the command tools are not offered — a call
// answers "tool unavailable" and runs nothing — while every other tool
// keeps working, and /readyz says why.
func TestJailUnavailableWithholdsCommands(t *testing.T) {
	// Serial: it swaps the package's helperBinary (serial tests run
	// before any parallel one).
	old := helperBinary
	helperBinary = func() (string, error) { return "/bin/false", nil }
	t.Cleanup(func() { helperBinary = old })
	h := start(t, withAllTools, withGatewayHelper)
	dev := h.token("acme", "alice", "developer")
	marker := filepath.Join(h.dir, "ws/acme/notes/ran")
	r := h.bashCall(dev, "echo ran > notes/ran", "")
	if r.str("outcome") != "unavailable" || r.str("content") != "tool unavailable" {
		t.Fatalf("bash without a jail: %s", r.raw)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran without a jail")
	}
	if r := h.call(dev, "read-file", `{"arguments":{"path":"notes/todo.txt"}}`); r.str("outcome") != "ok" {
		t.Fatalf("read-file should still work: %s", r.raw)
	}
	r = h.do("GET", "/v1/tools", dev, nil)
	if strings.Contains(string(r.raw), `"bash"`) {
		t.Errorf("bash is still listed: %s", r.raw)
	}
	r = h.do("GET", "/readyz", "", nil)
	conf, _ := r.body["confinement"].(map[string]any)
	if conf == nil || conf["ready"] != false || conf["mode"] != "jail" || fmt.Sprint(conf["reason"]) == "" {
		t.Fatalf("readyz does not say the jail is not ready: %s", r.raw)
	}
	if strings.Contains(string(r.raw), h.dir) {
		t.Error("readyz names a host path")
	}
}

// A background process runs in a jail too, and process-stop ends the whole
// jail: a setsid, double-forked child of the stopped program never writes
// the file it waited to write. So does gateway shutdown.
func TestJailBackgroundProcessStopEndsTheJail(t *testing.T) {
	t.Parallel()
	needPython(t)
	h := start(t, withAllTools, ownJailPack(t))
	dev := h.token("acme", "mallory", "anyone")
	call := func(tool string, args map[string]any) response {
		b, _ := json.Marshal(map[string]any{"arguments": args, "session_id": "s1"})
		return h.call(dev, tool, string(b))
	}
	script := func(name string) string {
		sandboxtest.MakeFIFO(t, filepath.Join(h.dir, "ws/acme/out", name))
		return "python3 -c " + shellQuote(sandboxtest.SurvivorScript("out/"+name)+"import time\nprint('started', flush=True)\ntime.sleep(60)")
	}
	start := func(name string) string {
		r := call("bash", map[string]any{"command": script(name), "background": true})
		data, _ := r.body["data"].(map[string]any)
		pid, _ := data["process_id"].(string)
		if r.str("outcome") != "ok" || pid == "" {
			t.Fatalf("background start: %s", r.raw)
		}
		r = call("process-output", map[string]any{"process_id": pid, "wait_ms": 10000})
		if !strings.Contains(r.str("content"), "started") {
			t.Fatalf("background program did not start: %s", r.raw)
		}
		return pid
	}
	pid := start("late-stop")
	start("late-shutdown")
	if r := call("process-stop", map[string]any{"process_id": pid, "grace_ms": 100}); r.str("outcome") != "ok" {
		t.Fatalf("process-stop: %s", r.raw)
	}
	// process-stop answers once the jail has ended.
	if sandboxtest.FIFOHasReader(t, filepath.Join(h.dir, "ws/acme/out", "late-stop")) {
		t.Error("late-stop: a detached child outlived its jail")
	}
	must(t, h.g.Close()) // what shutdown does after the server stops
	if sandboxtest.FIFOHasReader(t, filepath.Join(h.dir, "ws/acme/out", "late-shutdown")) {
		t.Error("late-shutdown: a detached child outlived its jail")
	}
}

// The dedicated helper (cmd/toolgate-sandbox), named by sandbox.helper,
// builds the same jail as the gateway binary: /readyz names it, a command
// runs, and the jail still hides what it must.
func TestJailWithTheDedicatedHelper(t *testing.T) {
	t.Parallel() // its own gateway, workspace and database; mostly waiting
	bin := filepath.Join(t.TempDir(), HelperName)
	build := exec.Command("go", "build", "-o", bin, "../../cmd/toolgate-sandbox")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the helper: %v\n%s", err, out)
	}
	h := start(t, withAllTools, func(s *setup) { s.extraYAML = "sandbox:\n  helper: " + bin + "\n" })
	conf, _ := h.do("GET", "/readyz", "", nil).body["confinement"].(map[string]any)
	if conf["ready"] != true || conf["helper"] != HelperName {
		t.Fatalf("confinement: %v", conf)
	}
	dev := h.token("acme", "alice", "developer")
	r := h.bashCall(dev, "grep -r PASSWORD .", "")
	if r.str("outcome") != "ok" || strings.Contains(string(r.raw), "acme-secret") {
		t.Fatalf("grep -r through the dedicated helper: %s", r.raw)
	}
	r = h.bashCall(dev, "wc -l docs/guide.md", "")
	if r.str("outcome") != "ok" || !strings.Contains(r.str("content"), "2 docs/guide.md") {
		t.Fatalf("wc through the dedicated helper: %s", r.raw)
	}
}
