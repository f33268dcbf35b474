package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/sandbox/sandboxtest"
)

// The jail, attacked as a hostile program would: each test runs real
// programs in a real jail (this test binary is the helper) and checks what
// they could see, write, execute and leave behind.

var (
	jailerOnce sync.Once
	jailer     *Jailer
	jailerErr  error
)

func testJailer(t testing.TB) *Jailer {
	t.Helper()
	jailerOnce.Do(func() {
		jailer, _, jailerErr = NewJailer(JailerOptions{Env: append(os.Environ(), envHelper+"=1")})
	})
	if jailerErr != nil {
		// The project's machines build the jail; a kernel that cannot is
		// a failure here, not a skip (the gateway would withhold commands).
		t.Fatalf("NewJailer: %v", jailerErr)
	}
	return jailer
}

func lookPaths(t testing.TB, names ...string) []string {
	t.Helper()
	var out []string
	for _, n := range names {
		// The gateway's PATH, not the test runner's.
		p := ""
		for _, d := range []string{"/usr/local/bin", "/usr/bin", "/bin"} {
			if fi, err := os.Stat(filepath.Join(d, n)); err == nil && fi.Mode().IsRegular() {
				p = filepath.Join(d, n)
				break
			}
		}
		if p == "" {
			t.Fatalf("this test needs %s in /usr/local/bin, /usr/bin or /bin", n)
		}
		out = append(out, p)
	}
	return out
}

// jailWorkspace is a workspace with a protected folder, a note, and a
// secret beside it (outside) that nothing in the jail may see.
type jailWorkspace struct {
	ws, outside string
}

func newJailWorkspace(t *testing.T) jailWorkspace {
	t.Helper()
	root := t.TempDir()
	w := jailWorkspace{ws: filepath.Join(root, "ws"), outside: filepath.Join(root, "gateway-secret")}
	files := map[string]string{
		"secrets/db.env": "PASSWORD=hunter2\n",
		"a/b/.env":       "TOKEN=deep\n",
		"notes/todo.txt": "todo\n",
		"src/main.go":    "package main\n",
		"README.md":      "readme\n",
	}
	for name, content := range files {
		p := filepath.Join(w.ws, name)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(content), 0o644))
	}
	must(t, os.WriteFile(w.outside, []byte("GATEWAY SECRET\n"), 0o600))
	must(t, testJailer(t).OwnWorkspace(w.ws))
	return w
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

type jailRun struct {
	out  string // stdout and stderr
	code int
}

// runInJail runs argv in a jail like the gateway does (process group of its
// own, the workspace as working folder).
func runInJail(t *testing.T, jl Jail, dir string, argv ...string) jailRun {
	t.Helper()
	j := testJailer(t)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), envHelper+"=1", "PATH=/usr/local/bin:/usr/bin:/bin")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	release, err := j.Wrap(cmd, jl)
	if err != nil {
		t.Fatalf("Wrap: %v", err)
	}
	err = cmd.Start()
	release()
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		t.Fatalf("jailed program did not end: %s", out.String())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("wait: %v", err)
	}
	return jailRun{out: out.String(), code: cmd.ProcessState.ExitCode()}
}

var defaultHide = []string{"secrets", "secrets/**", "**/.env", ".env"}

func TestJailStatusNamesItsMechanisms(t *testing.T) {
	st := testJailer(t).Status()
	if !st.Ready || st.Mode != ModeJail || st.UID == 0 {
		t.Fatalf("status %+v", st)
	}
	for _, m := range []string{MechanismNamespaces, MechanismLandlock, MechanismSeccomp, MechanismLimits} {
		if !strings.Contains(strings.Join(st.Mechanisms, ","), m) {
			t.Errorf("mechanisms %v lack %s", st.Mechanisms, m)
		}
	}
}

// Nothing of the host but the system folders and the workspace exists: not
// the gateway's secret beside the workspace, not the gateway's process, not
// the host's /root or /etc/shadow.
func TestJailSeesOnlyTheWorkspaceAndSystem(t *testing.T) {
	w := newJailWorkspace(t)
	progs := lookPaths(t, "sh", "cat", "ls", "id")
	script := fmt.Sprintf(`cat %s; echo "outside=$?"
cat /proc/%d/environ; echo "gateway-proc=$?"
cat /etc/shadow; echo "shadow=$?"
ls /root; echo "root=$?"
ls %s; echo "parent=$?"
cat README.md; id -u`, w.outside, os.Getpid(), filepath.Dir(w.ws))
	r := runInJail(t, Jail{Workspace: w.ws, Hide: defaultHide, Programs: progs}, w.ws, "/bin/sh", "-c", script)
	for _, want := range []string{"outside=1", "gateway-proc=1", "shadow=1", "root=2", "readme\n"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
	if strings.Contains(r.out, "GATEWAY SECRET") {
		t.Fatalf("the gateway's secret leaked:\n%s", r.out)
	}
	if !strings.Contains(r.out, "\nws\nparent=0") {
		t.Errorf("the folder around the workspace shows more than the workspace:\n%s", r.out)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if uid := lines[len(lines)-1]; uid == "0" {
		t.Errorf("the program runs as uid 0")
	}
}

// Hidden paths are not readable, listable or writable, under any name: a
// hard link elsewhere in the workspace is hidden too, and a folder holding
// a hidden path cannot be renamed out from under its glob.
func TestJailHidesProtectedPaths(t *testing.T) {
	w := newJailWorkspace(t)
	must(t, os.Link(filepath.Join(w.ws, "secrets/db.env"), filepath.Join(w.ws, "notes/innocent.txt")))
	progs := lookPaths(t, "sh", "cat", "ls", "grep", "mv", "cp")
	script := `grep -r PASSWORD . ; echo "grep=$?"
grep -r TOKEN . ; echo "grep2=$?"
cat secrets/db.env; echo "cat=$?"
ls secrets; echo "ls=$?"
echo x > secrets/new; echo "write=$?"
cat notes/innocent.txt; echo "link=$?"
mv a moved; echo "mv=$?"
cp -r a copy; cat copy/b/.env; echo "cp=$?"
cat a/b/.env; echo "deep=$?"`
	r := runInJail(t, Jail{Workspace: w.ws, Hide: defaultHide, Programs: progs}, w.ws, "/bin/sh", "-c", script)
	for _, leak := range []string{"hunter2", "TOKEN=deep"} {
		if strings.Contains(r.out, leak) {
			t.Fatalf("hidden content %q leaked:\n%s", leak, r.out)
		}
	}
	for _, want := range []string{"grep=2", "grep2=2", "cat=1", "ls=2", "write=2", "link=1", "mv=1", "deep=1"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
	if _, err := os.Stat(filepath.Join(w.ws, "a/b/.env")); err != nil {
		t.Errorf("the folder holding a hidden file was moved: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(w.ws, "secrets/db.env")); string(b) != "PASSWORD=hunter2\n" {
		t.Errorf("secret changed: %q", b)
	}
}

// With write paths, only they are writable, whatever option spelling a
// program takes (-oFILE, --output=FILE).
func TestJailWritesOnlyWritePaths(t *testing.T) {
	w := newJailWorkspace(t)
	progs := lookPaths(t, "sh", "sort", "touch")
	script := `sort -oREADME.md notes/todo.txt; echo "attached=$?"
sort --output=src/main.go notes/todo.txt; echo "long=$?"
touch newfile; echo "root=$?"
sort -o notes/sorted notes/todo.txt; echo "allowed=$?"
touch /tmp/scratch; echo "tmp=$?"`
	r := runInJail(t, Jail{Workspace: w.ws, Hide: defaultHide, WritePaths: []string{"notes/**"}, Programs: progs}, w.ws, "/bin/sh", "-c", script)
	for _, want := range []string{"attached=2", "long=2", "root=1", "allowed=0", "tmp=0"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(w.ws, "README.md")); string(b) != "readme\n" {
		t.Errorf("README.md overwritten: %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(w.ws, "notes/sorted")); string(b) != "todo\n" {
		t.Errorf("notes/sorted = %q", b)
	}
	// Files the jail creates belong to the jail's user on the host, never
	// to root (a set-user-ID file of root's would be a way up for anyone
	// who can reach the workspace).
	fi, err := os.Stat(filepath.Join(w.ws, "notes/sorted"))
	must(t, err)
	uid, gid := testJailer(t).UID()
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != uid || int(st.Gid) != gid || st.Uid == 0 {
		t.Errorf("created file owned by %d:%d, want the jail's %d:%d", st.Uid, st.Gid, uid, gid)
	}
	// No write paths at all (nil) leaves the workspace writable, hidden
	// paths excepted; an empty list makes it read-only.
	r = runInJail(t, Jail{Workspace: w.ws, Hide: defaultHide, Programs: progs}, w.ws, "/bin/sh", "-c", "touch newfile; echo root=$?; touch secrets/x; echo hidden=$?")
	if !strings.Contains(r.out, "root=0") || !strings.Contains(r.out, "hidden=1") {
		t.Errorf("nil write paths:\n%s", r.out)
	}
	r = runInJail(t, Jail{Workspace: w.ws, WritePaths: []string{}, Programs: progs}, w.ws, "/bin/sh", "-c", "touch notes/x; echo notes=$?")
	if !strings.Contains(r.out, "notes=1") {
		t.Errorf("empty write paths:\n%s", r.out)
	}
}

// An approved program cannot start one that was not approved:
// sort --compress-program=python3 (GTFOBins) fails to start python3, whose
// "script" would have copied the gateway's secret.
func TestJailExecutesOnlyApprovedPrograms(t *testing.T) {
	w := newJailWorkspace(t)
	lookPaths(t, "python3")
	line := fmt.Sprintf("open('notes/pwned','a').write('ran')\n")
	must(t, os.WriteFile(filepath.Join(w.ws, "notes/big.txt"), bytes.Repeat([]byte(line), 20000), 0o644))
	progs := lookPaths(t, "sort")
	r := runInJail(t, Jail{Workspace: w.ws, Hide: defaultHide, WritePaths: []string{"notes/**"}, Programs: progs}, w.ws,
		progs[0], "-S", "1K", "--compress-program=python3", "-T", "notes", "notes/big.txt", "-o", "notes/out")
	if _, err := os.Stat(filepath.Join(w.ws, "notes/pwned")); err == nil {
		t.Fatalf("python3 ran under sort:\n%s", r.out)
	}
	if r.code == 0 {
		t.Errorf("sort succeeded although its compressor could not start:\n%s", r.out)
	}
	// exec_paths widen it: the same program is then allowed.
	progs2 := lookPaths(t, "sh", "python3")
	r = runInJail(t, Jail{Workspace: w.ws, Hide: defaultHide, Programs: progs2[:1], ExecPaths: []string{filepath.Dir(progs2[1]) + "/**"}}, w.ws,
		"/bin/sh", "-c", "python3 -c 'print(6*7)'")
	if !strings.Contains(r.out, "42") {
		t.Errorf("exec_paths did not allow python3:\n%s", r.out)
	}
}

// No privilege: no capabilities, no_new_privs, a seccomp filter, a user
// that is not the host's root.
func TestJailHasNoPrivileges(t *testing.T) {
	w := newJailWorkspace(t)
	progs := lookPaths(t, "cat")
	r := runInJail(t, Jail{Workspace: w.ws, Programs: progs}, w.ws, progs[0], "/proc/self/status")
	want := map[string]string{"CapEff": "0000000000000000", "CapPrm": "0000000000000000", "CapBnd": "0000000000000000", "CapAmb": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2"}
	for _, line := range strings.Split(r.out, "\n") {
		k, v, _ := strings.Cut(line, ":")
		if w, ok := want[k]; ok {
			if strings.TrimSpace(v) != w {
				t.Errorf("%s = %s, want %s", k, strings.TrimSpace(v), w)
			}
			delete(want, k)
		}
		if k == "Uid" && strings.Fields(v)[0] == "0" {
			t.Errorf("uid 0 inside")
		}
	}
	if len(want) > 0 {
		t.Errorf("status lacks %v:\n%s", want, r.out)
	}
}

// A jailed program cannot make a user namespace of its own (which would
// give it capabilities over new namespaces and much of the kernel to
// attack) nor touch the kernel keyrings, with or without network; threads
// and fork still work (clone3 falls back to clone).
func TestJailRefusesNewUserNamespaces(t *testing.T) {
	w := newJailWorkspace(t)
	progs := lookPaths(t, "python3", "unshare")
	probe := `import ctypes, os, threading
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *args):
    r = getattr(libc, name)(*args)
    return "ok" if r >= 0 else os.strerror(ctypes.get_errno())
print("unshare-user:", call("unshare", 0x10000000))
print("unshare-user-mount:", call("unshare", 0x10000000 | 0x00020000))
print("keyctl:", call("syscall", 250 if os.uname().machine == "x86_64" else 219, 0, -3, 1))
t = threading.Thread(target=lambda: print("thread: ran"))
t.start(); t.join()
pid = os.fork()
if pid == 0:
    os._exit(7)
print("fork:", os.waitpid(pid, 0)[1] >> 8)`
	for _, network := range []bool{false, true} {
		r := runInJail(t, Jail{Workspace: w.ws, Programs: progs, Network: network}, w.ws, progs[0], "-c", probe)
		for _, want := range []string{"unshare-user: Operation not permitted", "unshare-user-mount: Operation not permitted", "keyctl: Operation not permitted", "thread: ran", "fork: 7"} {
			if !strings.Contains(r.out, want) {
				t.Errorf("network=%v: want %q in:\n%s", network, want, r.out)
			}
		}
		r = runInJail(t, Jail{Workspace: w.ws, Programs: progs, Network: network}, w.ws, progs[1], "-U", "-r", "/usr/bin/python3", "-c", "print('inside')")
		if r.code == 0 || strings.Contains(r.out, "inside") {
			t.Errorf("network=%v: unshare -U ran a program in a new user namespace:\n%s", network, r.out)
		}
	}
}

// Memory and process bombs are bounded by the jail's limits, and a CPU
// hog is killed with a note.
func TestJailBoundsResources(t *testing.T) {
	w := newJailWorkspace(t)
	progs := lookPaths(t, "sh", "python3")
	r := runInJail(t, Jail{Workspace: w.ws, Programs: progs, Limits: Limits{MemoryBytes: 256 << 20}}, w.ws,
		progs[1], "-c", "b = b'x' * 2_800_000_000; print('allocated')")
	if strings.Contains(r.out, "allocated") || r.code == 0 {
		t.Errorf("2.8 GB allocated under a 256 MiB limit:\n%s", r.out)
	}
	fork := `import os, time
n = 0
for i in range(1500):
    try:
        if os.fork() == 0:
            time.sleep(3)
            os._exit(0)
        n += 1
    except OSError:
        break
print("forked", n)`
	r = runInJail(t, Jail{Workspace: w.ws, Programs: progs, Limits: Limits{MaxProcesses: 20}}, w.ws, progs[1], "-c", fork)
	n := -1
	if i := strings.Index(r.out, "forked"); i >= 0 {
		fmt.Sscanf(r.out[i:], "forked %d", &n)
	}
	if n <= 0 || n > 20 {
		t.Errorf("%d processes forked in a jail limited to 20:\n%s", n, r.out)
	}
	r = runInJail(t, Jail{Workspace: w.ws, Programs: progs, Limits: Limits{CPUSeconds: 1}}, w.ws, progs[1], "-c", "while True: pass")
	if !strings.Contains(r.out, "[killed: CPU time limit]") {
		t.Errorf("CPU hog: code %d\n%s", r.code, r.out)
	}
}

// With a memory cgroup the limit bounds the jail, not each process: four
// processes of 120 MiB each do not fit in 256 MiB although each would
// under a per-process limit, and the result says why the jail ended.
func TestJailMemoryIsPerJail(t *testing.T) {
	st := testJailer(t).Status()
	if st.Memory != MemoryPerJail {
		if os.Geteuid() == 0 {
			t.Fatalf("a root gateway here should get a per-jail memory cgroup: %+v", st)
		}
		t.Skipf("memory is bounded per process here: %s", st.MemoryReason)
	}
	w := newJailWorkspace(t)
	progs := lookPaths(t, "python3")
	hog := `import os, time
kids = []
for i in range(4):
    pid = os.fork()
    if pid == 0:
        b = b'x' * (120 << 20)
        time.sleep(5)
        os._exit(0)
    kids.append(pid)
bad = 0
for k in kids:
    _, st = os.waitpid(k, 0)
    if st != 0:
        bad += 1
print("children failed:", bad)
raise SystemExit(1 if bad else 0)`
	r := runInJail(t, Jail{Workspace: w.ws, Programs: progs, Limits: Limits{MemoryBytes: 256 << 20}}, w.ws, progs[0], "-c", hog)
	if r.code == 0 || !strings.Contains(r.out, "[killed: memory limit]") {
		t.Errorf("480 MiB across four processes in a 256 MiB jail: code %d\n%s", r.code, r.out)
	}
	// The same program under a limit it fits in runs, with no note.
	r = runInJail(t, Jail{Workspace: w.ws, Programs: progs, Limits: Limits{MemoryBytes: 768 << 20}}, w.ws, progs[0], "-c", hog)
	if r.code != 0 || strings.Contains(r.out, "memory limit") {
		t.Errorf("480 MiB in a 768 MiB jail: code %d\n%s", r.code, r.out)
	}
	// No cgroup of a finished jail is left behind.
	j := testJailer(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ents, err := os.ReadDir(j.mem.dir)
		must(t, err)
		if len(ents) == 0 || !hasJailDirs(ents) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("cgroups left after the jails ended: %v", ents)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func hasJailDirs(ents []os.DirEntry) bool {
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "j") {
			return true
		}
	}
	return false
}

// A setsid, double-forked child is killed when the program ends: it never
// writes the file it waited to write.
func TestJailKillsSurvivors(t *testing.T) {
	w := newJailWorkspace(t)
	progs := lookPaths(t, "python3")
	fifo := survivorFIFO(t, w.ws)
	r := runInJail(t, Jail{Workspace: w.ws, Programs: progs}, w.ws, progs[0], "-c", sandboxtest.SurvivorScript("survivor")+"print('parent done')")
	if !strings.Contains(r.out, "parent done") {
		t.Fatalf("program:\n%s", r.out)
	}
	if sandboxtest.FIFOHasReader(t, fifo) {
		t.Fatal("a double-forked child survived its jail")
	}
}

// survivorFIFO makes the FIFO a survivor holds, in the workspace ws.
func survivorFIFO(t *testing.T, ws string) string {
	t.Helper()
	p := filepath.Join(ws, "survivor")
	sandboxtest.MakeFIFO(t, p)
	must(t, testJailer(t).OwnWorkspace(ws))
	return p
}

// Without the network obligation the jail has no network: a listener on
// the host's loopback is unreachable. With it, it is reachable.
func TestJailNetwork(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("hello from host\n"))
			c.Close()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	w := newJailWorkspace(t)
	progs := lookPaths(t, "python3")
	script := "import socket; s = socket.create_connection(('127.0.0.1', " + port + "), 2); print(s.recv(64))"
	r := runInJail(t, Jail{Workspace: w.ws, Programs: progs}, w.ws, progs[0], "-c", script)
	if strings.Contains(r.out, "hello from host") {
		t.Fatalf("a jail without network reached the host:\n%s", r.out)
	}
	r = runInJail(t, Jail{Workspace: w.ws, Programs: progs, Network: true}, w.ws, progs[0], "-c", script)
	if !strings.Contains(r.out, "hello from host") {
		t.Fatalf("a jail with network could not connect:\n%s", r.out)
	}
}

// Two jails with the network obligation share the host's network
// namespace, but not their abstract unix sockets: one tenant's listener
// on an abstract name is unreachable from another tenant's jail (Landlock
// scoping, whatever the network), as it is from the host's processes
// outside both.
func TestJailAbstractSocketsStayScopedWithNetwork(t *testing.T) {
	w := newJailWorkspace(t)
	py := lookPaths(t, "python3")[0]
	name := fmt.Sprintf("toolgate-test-%d", time.Now().UnixNano())
	listen := fmt.Sprintf(`import socket, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\0%s")
s.listen(1)
open("listening", "w").write("1")
s.settimeout(30)
try:
    c, _ = s.accept()
    c.sendall(b"leaked")
except OSError:
    pass
`, name)
	out, err := os.CreateTemp(t.TempDir(), "out")
	must(t, err)
	j := testJailer(t)
	lr, err := j.Start(Job{
		Jail:   Jail{Workspace: w.ws, MountAt: DefaultMountAt, Programs: []string{py}, Network: true},
		Run:    Run{Program: py, Args: []string{"python3", "-c", listen}},
		Stdout: out,
	})
	must(t, err)
	t.Cleanup(func() { lr.Kill(); lr.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(w.ws, "listening")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the listener did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	connect := fmt.Sprintf(`import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect("\0%s")
    print("connected", s.recv(16))
except OSError as e:
    print("refused", e.errno)
`, name)
	w2 := newJailWorkspace(t)
	r := runInJail(t, Jail{Workspace: w2.ws, Programs: []string{py}, Network: true}, w2.ws, py, "-c", connect)
	if !strings.Contains(r.out, "refused") || strings.Contains(r.out, "leaked") {
		t.Fatalf("another jail reached an abstract socket:\n%s", r.out)
	}
}

func TestPlanWorkspaceWritePaths(t *testing.T) {
	w := newJailWorkspace(t)
	must(t, os.MkdirAll(filepath.Join(w.ws, "docs/sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(w.ws, "docs/a.md"), nil, 0o644))
	must(t, os.WriteFile(filepath.Join(w.ws, "docs/sub/b.md"), nil, 0o644))
	plan, err := planWorkspace(w.ws, defaultHide, []string{"src/**", "docs/*.md", "README.md", "missing/**", "notes"})
	must(t, err)
	// A folder glob covers the folder; a narrower glob only the files it
	// matches now; a literal only an existing file; never a folder a
	// literal names.
	want := "README.md,docs/a.md,src"
	if got := strings.Join(plan.writable, ","); got != want {
		t.Errorf("writable = %s, want %s", got, want)
	}
	var hidden []string
	for _, h := range plan.hidden {
		hidden = append(hidden, h.rel)
	}
	if got := strings.Join(hidden, ","); got != "a/b/.env,secrets" {
		t.Errorf("hidden = %s", got)
	}
	if got := strings.Join(plan.pins, ","); got != "a,a/b" {
		t.Errorf("pins = %s", got)
	}
	plan, err = planWorkspace(w.ws, nil, []string{"**"})
	must(t, err)
	if strings.Join(plan.writable, ",") != "." {
		t.Errorf("** = %v", plan.writable)
	}
}

func TestJailRefusesBadPaths(t *testing.T) {
	for _, jl := range []Jail{
		{Workspace: "relative"},
		{Workspace: "/ws", Hide: []string{"/abs"}},
		{Workspace: "/ws", WritePaths: []string{"["}},
		{Workspace: "/ws", ExecPaths: []string{"relative/**"}},
		{Workspace: "/ws", Programs: []string{"sort"}},
		{Workspace: "/ws", MountAt: "relative"},
		{Workspace: "/ws", MountAt: "/"},
		{Workspace: "/ws", MountAt: "/etc/ws"},
		{Workspace: "/ws", MountAt: "/workspace/../etc"},
		{Workspace: "/ws", ExecPaths: []string{"/etc/**"}},
		{Workspace: "/ws", ExecPaths: []string{"/proc/self/exe"}},
	} {
		if _, err := testJailer(t).planner.plan(jl, -1, -1); err == nil {
			t.Errorf("%+v accepted", jl)
		}
	}
}

// CPU is shared between tenants by weight, not by how many processes they
// run: two busy jails of a tenant of weight 1000 get far more of a
// contended CPU than two of a tenant of weight 100 (ideally ten times).
// The jails count as fast as they can, all on one CPU; the shares are
// compared over one window in which all four run.
func TestJailCPUIsSharedByWeight(t *testing.T) {
	j := testJailer(t)
	if j.cpu == nil {
		if os.Geteuid() == 0 {
			t.Fatalf("a root gateway here must have CPU cgroups: %s", j.Status().CPUReason)
		}
		t.Skip("no writable cpu cgroup for a non-root gateway: ", j.Status().CPUReason)
	}
	w := newJailWorkspace(t)
	py := lookPaths(t, "python3")[0]
	hog := `import os, sys
os.sched_setaffinity(0, {0})
name = sys.argv[1]
n = 0
while True:
    n += 1
    if n % 200000 == 0:
        with open(name + ".tmp", "w") as f:
            f.write(str(n))
        os.replace(name + ".tmp", name)
`
	var runs []*Running
	t.Cleanup(func() {
		for _, r := range runs {
			r.Kill()
			r.Wait()
		}
	})
	names := []string{"heavy-1", "heavy-2", "light-1", "light-2"}
	for _, name := range names {
		group, weight := "cpu-test-heavy", 1000
		if strings.HasPrefix(name, "light") {
			group, weight = "cpu-test-light", 100
		}
		r, err := j.Start(Job{
			Jail:   Jail{Workspace: w.ws, MountAt: DefaultMountAt, Programs: []string{py}, CPUGroup: group, CPUWeight: weight},
			Run:    Run{Program: py, Args: []string{"python3", "-c", hog, "count-" + name}},
			Stdout: os.Stderr,
		})
		must(t, err)
		runs = append(runs, r)
	}
	counts := func() map[string]int {
		out := map[string]int{}
		for _, name := range names {
			b, err := os.ReadFile(filepath.Join(w.ws, "count-"+name))
			if err != nil {
				return nil
			}
			n, _ := strconv.Atoi(string(b))
			out[name] = n
		}
		return out
	}
	deadline := time.Now().Add(30 * time.Second)
	var before map[string]int
	for before == nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		before = counts()
	}
	if before == nil {
		t.Fatal("the four jails did not all start counting")
	}
	time.Sleep(2 * time.Second) // the measuring window
	after := counts()
	sum := func(prefix string) int {
		n := 0
		for name, c := range after {
			if strings.HasPrefix(name, prefix) {
				n += c - before[name]
			}
		}
		return n
	}
	heavy, light := sum("heavy"), sum("light")
	t.Logf("weight 1000: %d, weight 100: %d (%.1f×)", heavy, light, float64(heavy)/float64(max(1, light)))
	if heavy < 3*light {
		t.Errorf("weight 1000 counted %d, weight 100 %d: the CPU is not shared by weight", heavy, light)
	}
}

// Closing a Jailer waits for the cgroup removals it started: a removal
// blocked on a jail that is still running (an MCP upstream's, say) wakes
// and ends before Close returns, so a closed gateway leaves no goroutine
// behind (the start-up sweep removes what it did not finish).
func TestJailerCloseWaitsForItsCleanups(t *testing.T) {
	j, st, err := NewJailer(JailerOptions{Env: append(os.Environ(), envHelper+"=1")})
	if err != nil {
		t.Fatalf("NewJailer: %v", err)
	}
	if st.Memory != MemoryPerJail {
		j.Close()
		t.Fatalf("this test needs per-jail memory cgroups (root, cgroup v1 memory): %s", st.MemoryReason)
	}
	w := newJailWorkspace(t)
	fifo := filepath.Join(w.ws, "hold")
	sandboxtest.MakeFIFO(t, fifo)
	progs := lookPaths(t, "cat")
	cmd := exec.Command(progs[0], "hold")
	cmd.Dir = w.ws
	cmd.Env = append(os.Environ(), envHelper+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	release, err := j.Wrap(cmd, Jail{Workspace: w.ws, Programs: progs, Limits: Limits{MemoryBytes: 64 << 20}})
	if err != nil {
		t.Fatalf("Wrap: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	defer cmd.Wait()
	release() // the cgroup's removal now waits for the jail to end
	// The jailed cat is running once it holds the FIFO open; the writer
	// kept open here keeps it reading until its jail ends.
	var hold *os.File
	for hold == nil {
		fd, err := syscall.Open(fifo, syscall.O_WRONLY|syscall.O_NONBLOCK, 0)
		switch {
		case err == nil:
			hold = os.NewFile(uintptr(fd), fifo)
		case errors.Is(err, syscall.ENXIO):
			time.Sleep(time.Millisecond)
		default:
			t.Fatal(err)
		}
	}
	defer hold.Close()
	if err := j.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Checked at once: Close must have waited, not merely have started
	// what ends later.
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	if strings.Contains(stacks, "(*jailCgroup).") || strings.Contains(stacks, "(*cleanups).") {
		t.Fatalf("a cleanup of the closed Jailer is still running:\n%s", stacks)
	}
}
