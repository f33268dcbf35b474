package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/toolgate/toolgate/internal/auth"
)

// The layers around the jail attacked through the real HTTP server (issue
// 21), with the shipped pack and with a pack of our own, as a root gateway
// and as a non-root one: redirections and globs, the jail's init, the
// dynamic loader, memory files, set-user-ID files, FIFOs, a gateway killed
// with SIGKILL.

// probeScript is what an approved python3 tries from inside the jail: the
// init's threads' capabilities and its memory, environment and command
// line; signals to the init; a program written into a memory file; perl
// (never approved) through the dynamic loader; a set-user-ID copy of id.
func probeScript(loader string) string {
	return fmt.Sprintf(`import glob, os, shutil, signal, stat
def status(p):
    d = {}
    for line in open(p):
        k, _, v = line.partition(":")
        d[k] = v.strip()
    return d
caps = set()
for task in glob.glob("/proc/1/task/*"):
    s = status(task + "/status")
    caps.update([s["CapPrm"], s["CapEff"], s["CapInh"], s["CapAmb"], s["CapBnd"]])
print("init-caps", ",".join(sorted(caps)))
for name in ["mem", "environ", "maps"]:
    try:
        open("/proc/1/" + name, "rb").read(16)
        print("init", name, "READ")
    except OSError as e:
        print("init", name, "refused")
print("init-cmdline", open("/proc/1/cmdline", "rb").read().replace(b"\0", b" ").decode())
for sig in [signal.SIGABRT, signal.SIGSEGV, signal.SIGQUIT]:
    try:
        os.kill(1, sig)
    except OSError:
        pass
try:
    fd = os.memfd_create("x", 0)
    print("memfd created")
except OSError as e:
    print("memfd refused", e.errno)
pid = os.fork()
if pid == 0:
    try:
        os.execv(%[1]q, [%[1]q, "/usr/bin/perl", "-e", "print qq(perl-ran\n)"])
    except OSError as e:
        print("loader refused", e.errno, flush=True)
    os._exit(3)
os.waitpid(pid, 0)
target = "out/idcopy" if os.path.isdir("out") else "notes/idcopy"
shutil.copy("/usr/bin/id", target)
try:
    os.chmod(target, 0o6755)
    print("setuid DONE")
except OSError as e:
    print("setuid refused", e.errno)
print("probe-done")
`, loader)
}

// checkProbe checks what probeScript printed.
func checkProbe(t *testing.T, out string) {
	t.Helper()
	if !strings.Contains(out, "probe-done") {
		t.Fatalf("the probe did not finish:\n%s", out)
	}
	for _, want := range []string{"init-caps 0000000000000000\n", "init mem refused", "init environ refused", "init maps refused", "memfd refused", "setuid refused"} {
		if !strings.Contains(out, want) {
			t.Errorf("probe output lacks %q:\n%s", want, out)
		}
	}
	for _, bad := range []string{"READ", "perl-ran", "DONE", "goroutine", "SIGABRT", "/tmp/", "--ws"} {
		if strings.Contains(out, bad) {
			t.Errorf("probe output has %q:\n%s", bad, out)
		}
	}
}

// hostLoader is the dynamic loader of /usr/bin/true.
func hostLoader(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("readelf", "-l", "/usr/bin/true").Output()
	if err == nil {
		if _, rest, ok := strings.Cut(string(out), "[Requesting program interpreter: "); ok {
			l, _, _ := strings.Cut(rest, "]")
			return l
		}
	}
	for _, p := range []string{"/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-aarch64.so.1"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	t.Fatal("no dynamic loader found")
	return ""
}

// checkNoSetuid fails when anything in the workspace has a set-user-ID or
// set-group-ID bit, or belongs to another user than the jail's.
func checkNoSetuid(t *testing.T, h *harness, ws string) {
	t.Helper()
	uid, gid := h.g.jail.jailer.UID()
	_ = filepath.Walk(ws, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s is %v on the host", p, fi.Mode())
		}
		if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid || int(st.Gid) != gid {
			t.Errorf("%s belongs to %d:%d on the host, want the jail's %d:%d", p, st.Uid, st.Gid, uid, gid)
		}
		return nil
	})
}

// approvedBash posts cmd as token, approves it as approver and returns the
// call's result.
func (h *harness) approvedBash(token, approver, cmd string) response {
	h.t.Helper()
	r := h.bashCall(token, cmd, "")
	if r.str("outcome") != "approval_required" {
		h.t.Fatalf("%s should wait for a human: %s", cmd, r.raw)
	}
	id, callID := approvalID(h.t.(*testing.T), r), r.str("call_id")
	if ok := h.do("POST", "/v1/approvals/"+id+"/approve", approver, nil); ok.status != 200 || ok.str("outcome") != "ok" {
		h.t.Fatalf("approve: %d %.300s", ok.status, ok.raw)
	}
	return h.do("GET", "/v1/calls/"+callID, token, nil)
}

func TestJailAttacksWithTheDefaultPack(t *testing.T) {
	t.Parallel() // its own gateway, workspace and database; mostly waiting
	needPython(t)
	asGatewayUsers(t, func(t *testing.T) {
		h := start(t, withAllTools)
		ws := filepath.Join(h.dir, "ws/acme")
		must(t, syscall.Mkfifo(filepath.Join(ws, "notes/fifo"), 0o666))
		uid, gid := h.g.jail.jailer.UID()
		must(t, os.Lchown(filepath.Join(ws, "notes/fifo"), uid, gid))
		mallory := h.token("acme", "mallory", "developer")
		bob := h.token("acme", "bob", "approver")
		leak := func(r response) {
			t.Helper()
			if strings.Contains(string(r.raw), "acme-secret") {
				t.Fatalf("a protected file leaked: %s", r.raw)
			}
			if strings.Contains(string(r.raw), h.dir) {
				t.Errorf("a host path reached the response: %s", r.raw)
			}
		}
		for _, c := range []struct{ cmd, outcome, content string }{
			{"cat < secrets/db.env", "denied", "secrets/db.env is not allowed: the path is protected"},
			{"wc -l < secrets/db.env", "denied", "the path is protected"},
			{"echo x > README.md", "denied", "write to README.md is not allowed for your roles"},
			{"echo y > secrets/db.env", "denied", "the path is protected"},
			{"echo y >> secrets/db.env", "denied", "the path is protected"},
			{"cat < notes/fifo", "invalid_arguments", "is not a regular file"},
			{"echo x > $HOME/secrets/db.env", "invalid_arguments", "a redirect target must be a literal path"},
			{"cat < ../globex/docs/guide.md", "denied", "outside the workspace"},
		} {
			r := h.bashCall(mallory, c.cmd, "")
			if r.str("outcome") != c.outcome || !strings.Contains(r.str("content"), c.content) {
				t.Errorf("%s: %s %q, want %s with %q", c.cmd, r.str("outcome"), r.str("content"), c.outcome, c.content)
			}
			leak(r)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "secrets/db.env")); string(b) != "PASSWORD=acme-secret\n" {
			t.Errorf("secrets/db.env changed: %q", b)
		}
		if _, err := os.Stat(filepath.Join(ws, "README.md")); err == nil {
			t.Error("README.md was written")
		}
		// Globs are expanded in the jail: a glob needs a human in acme, and
		// approved it lists nothing of the hidden secrets/.
		r := h.approvedBash(mallory, bob, "echo s*/*")
		if r.str("outcome") != "ok" || strings.Contains(r.str("content"), "db.env") || !strings.Contains(r.str("content"), "src/app.py") {
			t.Errorf("echo s*/*: %s", r.raw)
		}
		leak(r)
		// A FIFO as an argument blocks cat until the call's timeout ends it.
		b, _ := json.Marshal(map[string]any{"arguments": map[string]any{"command": "cat notes/fifo", "timeout_ms": 2000}, "session_id": "s1"})
		r = h.call(mallory, "bash", string(b))
		if data, _ := r.body["data"].(map[string]any); r.str("outcome") != "ok" || data["timed_out"] != true {
			t.Errorf("cat of a FIFO: %s", r.raw)
		}
		// Approved code probes the jail from inside.
		r = h.approvedBash(mallory, bob, "python3 -c "+shellQuote(probeScript(hostLoader(t))))
		if r.str("outcome") != "ok" {
			t.Fatalf("approved probe: %s", r.raw)
		}
		checkProbe(t, r.str("content"))
		leak(r)
		checkNoSetuid(t, h, ws)
		// The happy paths: pipes, a redirect into a write path, a
		// here-document, all without a human.
		for _, c := range []struct{ cmd, content string }{
			{"cat docs/guide.md | wc -l", "2\n[exit code: 0]"},
			{"echo added >> notes/todo.txt", "[exit code: 0]"},
			{"cat > notes/here.txt <<EOF\nfrom a here-document\nEOF", "[exit code: 0]"},
			{"sort notes/todo.txt > notes/sorted.txt 2>&1", "[exit code: 0]"},
		} {
			if r := h.bashCall(mallory, c.cmd, ""); r.str("outcome") != "ok" || r.str("content") != c.content {
				t.Errorf("%s: %s", c.cmd, r.raw)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "notes/todo.txt")); string(b) != "todo\nadded\n" {
			t.Errorf("notes/todo.txt = %q", b)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "notes/here.txt")); string(b) != "from a here-document\n" {
			t.Errorf("notes/here.txt = %q", b)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "notes/sorted.txt")); string(b) != "added\ntodo\n" {
			t.Errorf("notes/sorted.txt = %q", b)
		}
		h.verify("acme")
	})
}

func TestJailAttacksWithAPackOfOurOwn(t *testing.T) {
	t.Parallel() // its own gateway, workspace and database; mostly waiting
	needPython(t)
	asGatewayUsers(t, func(t *testing.T) {
		h := start(t, withAllTools, ownJailPack(t))
		ws := filepath.Join(h.dir, "ws/acme")
		dev := h.token("acme", "mallory", "anyone")
		run := func(cmd string, timeoutMS int) response {
			t.Helper()
			args := map[string]any{"command": cmd}
			if timeoutMS > 0 {
				args["timeout_ms"] = timeoutMS
			}
			b, _ := json.Marshal(map[string]any{"arguments": args, "session_id": "s1"})
			r := h.call(dev, "bash", string(b))
			if r.str("outcome") != "ok" {
				t.Fatalf("%s: the own pack allows every command: %s", cmd, r.raw)
			}
			if strings.Contains(string(r.raw), "PRIVATE KEY") {
				t.Fatalf("%s: a hidden file leaked: %s", cmd, r.raw)
			}
			return r
		}
		for _, c := range []struct{ cmd, want string }{
			{"cat < private/key", "Permission denied"},
			{"echo p*/*", "p*/*"},
			{"echo x > in.txt", "Read-only file system"},
			{"echo x >> in.txt", "Read-only file system"},
			{"sort in.txt > out/sorted", "[exit code: 0]"},
		} {
			if r := run(c.cmd, 0); !strings.Contains(strings.ToLower(r.str("content")), strings.ToLower(c.want)) {
				t.Errorf("%s: %q, want %q", c.cmd, r.str("content"), c.want)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "in.txt")); string(b) != "b\na\n" {
			t.Errorf("in.txt changed: %q", b)
		}
		if b, _ := os.ReadFile(filepath.Join(ws, "out/sorted")); string(b) != "a\nb\n" {
			t.Errorf("out/sorted = %q", b)
		}
		// A FIFO: refused as a redirect before it blocks, ended at the
		// timeout as an argument.
		r := run("mkfifo out/f; cat < out/f; echo after", 2000)
		if !strings.Contains(r.str("content"), "refused: not a regular file") || !strings.Contains(r.str("content"), "after") {
			t.Errorf("FIFO redirect: %s", r.raw)
		}
		r = run("cat out/f", 2000)
		if data, _ := r.body["data"].(map[string]any); data["timed_out"] != true {
			t.Errorf("cat of a FIFO: %s", r.raw)
		}
		// The loader reached through xargs (GTFOBins) cannot map perl.
		loader := hostLoader(t)
		run(fmt.Sprintf("printf '%%s\\n' %s /usr/bin/perl -e 'print(qq(perl-ran))' > out/args.txt", loader), 0)
		if r := run("xargs -a out/args.txt xargs", 0); strings.Contains(r.str("content"), "perl-ran") {
			t.Errorf("perl ran through the loader: %s", r.raw)
		}
		if r := run(loader+" /usr/bin/perl -e 'print(qq(perl-ran))'", 0); strings.Contains(r.str("content"), "perl-ran") {
			t.Errorf("perl ran through the loader: %s", r.raw)
		}
		// No set-user-ID file, however it is made.
		r = run("cp /usr/bin/id out/x; chmod 6755 out/x; echo chmod=$?; chmod g+s out/x; echo chmod-g=$?", 0)
		if !strings.Contains(r.str("content"), "chmod=1") || !strings.Contains(r.str("content"), "chmod-g=1") {
			t.Errorf("chmod of a set-user-ID mode: %s", r.raw)
		}
		checkProbe(t, run("python3 -c "+shellQuote(probeScript(loader)), 0).str("content"))
		checkNoSetuid(t, h, ws)
	})
}

// Nothing survives the gateway: a gateway killed with SIGKILL while a
// background command runs leaves no process of its jails behind.
func TestGatewayKilledLeavesNoJailBehind(t *testing.T) {
	asGatewayUsers(t, func(t *testing.T) {
		dir := t.TempDir()
		must(t, os.CopyFS(filepath.Join(dir, "policies"), os.DirFS("../../policies")))
		for _, d := range []string{"ws/acme", "ws/globex"} {
			must(t, os.MkdirAll(filepath.Join(dir, d), 0o755))
		}
		cfg := filepath.Join(dir, "gateway.yaml")
		must(t, os.WriteFile(cfg, []byte(`listen: "127.0.0.1:0"
policy:
  dir: policies
audit:
  driver: sqlite
  dsn: audit.db
auth:
  jwt:
    hs256_secret_file: secret
tenants:
  acme:
    workspace: ws/acme
  globex:
    workspace: ws/globex
`+allTools), 0o644))
		self, err := os.Executable()
		must(t, err)
		gw := exec.Command(self)
		gw.Env = append(os.Environ(), envServe+"="+cfg)
		base := servingGateway(t, gw)
		secret, err := auth.ReadHS256Secret(filepath.Join(dir, "secret"))
		must(t, err)
		tok, err := auth.MintHS256(secret, auth.MintClaims{Tenant: "globex", Subject: "bob", Roles: []string{"developer"}, TTL: time.Hour}, time.Now())
		must(t, err)
		h := &harness{t: t, base: base, spec: loadSpec(t), client: &httpClient}
		b, _ := json.Marshal(map[string]any{"arguments": map[string]any{"command": "sleep 300", "background": true}, "session_id": "s1"})
		if r := h.call(tok, "bash", string(b)); r.str("outcome") != "ok" {
			t.Fatalf("background start: %s", r.raw)
		}
		// The jail: stage 1, stage 2 become the init, the interpreter, sleep.
		var pids []int
		deadline := time.Now().Add(20 * time.Second)
		for {
			if pids = jailsOf(t, gw.Process.Pid); len(pids) >= 4 || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if len(pids) < 4 {
			t.Fatalf("the jail has processes %v, want stage 1, the init, the interpreter and sleep", pids)
		}
		fds := map[int]int{}
		for _, p := range pids {
			fd, err := unix.PidfdOpen(p, 0)
			must(t, err)
			fds[p] = fd
		}
		must(t, gw.Process.Signal(syscall.SIGKILL))
		if alive := awaitPidfds(fds, 20*time.Second); len(alive) > 0 {
			t.Fatalf("processes of the jail outlived the gateway: %v", alive)
		}
	})
}

// awaitPidfds waits until every process open as a pidfd has exited, at
// most d, and returns those still running.
func awaitPidfds(fds map[int]int, d time.Duration) []int {
	deadline := time.Now().Add(d)
	for len(fds) > 0 && time.Now().Before(deadline) {
		var polls []unix.PollFd
		var pids []int
		for pid, fd := range fds {
			polls = append(polls, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
			pids = append(pids, pid)
		}
		if _, err := unix.Poll(polls, int(time.Until(deadline).Milliseconds())+1); err != nil && !errors.Is(err, unix.EINTR) {
			break
		}
		for i, p := range polls {
			if p.Revents != 0 {
				unix.Close(fds[pids[i]])
				delete(fds, pids[i])
			}
		}
	}
	var alive []int
	for pid, fd := range fds {
		alive = append(alive, pid)
		unix.Close(fd)
	}
	return alive
}
