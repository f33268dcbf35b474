package sandbox

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

type confinedRun struct {
	stdout, stderr string
	code           int
}

// runConfined runs cmd through Wrap with this test binary as the helper.
func runConfined(t testing.TB, cmd *exec.Cmd, p Policy) confinedRun {
	t.Helper()
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, envHelper+"=1")
	if err := Wrap(cmd, p, ""); err != nil {
		t.Fatalf("Wrap: %v", err)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run: %v", err)
	}
	return confinedRun{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

// runUnconfined runs cmd as it is: the control for a confined run.
func runUnconfined(t testing.TB, cmd *exec.Cmd) confinedRun {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("run: %v", err)
	}
	return confinedRun{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

func shell(script string, env ...string) *exec.Cmd {
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

func readFile(t *testing.T, path string) (string, bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b), true
}

func TestConfinedFilesystem(t *testing.T) {
	requireLandlock(t, 1)
	tests := []struct {
		name   string
		script string
		wantOK bool
		check  func(t *testing.T, ws, out string, r confinedRun)
	}{
		{
			name: "writes inside the workspace", script: `echo x > "$WS/ok"`, wantOK: true,
			check: func(t *testing.T, ws, _ string, _ confinedRun) {
				if got, _ := readFile(t, filepath.Join(ws, "ok")); got != "x\n" {
					t.Errorf("workspace file = %q", got)
				}
			},
		},
		{
			name: "creates, moves and removes inside the workspace", wantOK: true,
			script: `mkdir "$WS/d" && echo y > "$WS/d/f" && mv "$WS/d/f" "$WS/g" && rm -r "$WS/d" && ln -s g "$WS/l" && : > "$WS/g"`,
			check: func(t *testing.T, ws, _ string, _ confinedRun) {
				if got, ok := readFile(t, filepath.Join(ws, "g")); !ok || got != "" {
					t.Errorf("moved file = %q, %v", got, ok)
				}
			},
		},
		{
			name: "cannot create a file in an unlisted temp dir", script: `echo x > "$OUT/new"`,
			check: func(t *testing.T, _, out string, r confinedRun) {
				if _, ok := readFile(t, filepath.Join(out, "new")); ok {
					t.Error("file outside the workspace exists")
				}
				if !strings.Contains(r.stderr, "Permission denied") {
					t.Errorf("stderr = %q, want permission denied", r.stderr)
				}
			},
		},
		{name: "cannot truncate a file outside", script: `: > "$OUT/existing"`, check: outsideUnchanged},
		{name: "cannot append to a file outside", script: `echo more >> "$OUT/existing"`, check: outsideUnchanged},
		{name: "cannot remove a file outside", script: `rm -f "$OUT/existing"`, check: outsideUnchanged},
		{
			name: "cannot make a directory or symlink outside", script: `mkdir "$OUT/d" || ln -s x "$OUT/l"; mkdir "$OUT/d" || ln -s x "$OUT/l"`,
			check: func(t *testing.T, _, out string, _ confinedRun) {
				for _, n := range []string{"d", "l"} {
					if _, err := os.Lstat(filepath.Join(out, n)); err == nil {
						t.Errorf("%s created outside", n)
					}
				}
			},
		},
		{
			name: "cannot move a workspace file outside", script: `mv "$WS/src" "$OUT/moved"`,
			check: func(t *testing.T, ws, out string, _ confinedRun) {
				if _, ok := readFile(t, filepath.Join(out, "moved")); ok {
					t.Error("file moved outside")
				}
				if _, ok := readFile(t, filepath.Join(ws, "src")); !ok {
					t.Error("source file gone")
				}
			},
		},
		{
			name: "a symlink inside the workspace does not lead out", script: `echo x > "$WS/escape/new"`,
			check: func(t *testing.T, _, out string, _ confinedRun) {
				if _, ok := readFile(t, filepath.Join(out, "new")); ok {
					t.Error("wrote through the symlink")
				}
			},
		},
		{
			name: "reads outside the workspace", script: `cat "$OUT/existing"`, wantOK: true,
			check: func(t *testing.T, _, _ string, r confinedRun) {
				if r.stdout != "keep" {
					t.Errorf("stdout = %q", r.stdout)
				}
			},
		},
		{name: "reads /etc/hostname", script: `test ! -e /etc/hostname || cat /etc/hostname > /dev/null`, wantOK: true},
		{name: "writes to /dev/null and its own stdout", script: `echo x > /dev/null && echo y > /dev/stdout && head -c 4 /dev/urandom > /dev/null`, wantOK: true},
		{name: "runs a script it wrote in the workspace", script: `printf '#!/bin/sh\nexit 0\n' > "$WS/s.sh" && chmod +x "$WS/s.sh" && "$WS/s.sh"`, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ws, out := t.TempDir(), t.TempDir()
			if err := os.WriteFile(filepath.Join(out, "existing"), []byte("keep"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(ws, "src"), []byte("src"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(out, filepath.Join(ws, "escape")); err != nil {
				t.Fatal(err)
			}
			r := runConfined(t, shell(tt.script, "WS="+ws, "OUT="+out), Policy{WritableDirs: []string{ws}})
			if ok := r.code == 0; ok != tt.wantOK {
				t.Fatalf("exit %d (stderr %q), want success %v", r.code, r.stderr, tt.wantOK)
			}
			if tt.check != nil {
				tt.check(t, ws, out, r)
			}
		})
	}
}

func outsideUnchanged(t *testing.T, _, out string, _ confinedRun) {
	if got, ok := readFile(t, filepath.Join(out, "existing")); got != "keep" || !ok {
		t.Errorf("file outside = %q, exists %v; want it untouched", got, ok)
	}
}

// The same commands run unconfined do what the confined ones may not, so
// the denials above come from the sandbox and not from the test setup.
func TestUnconfinedControlCanWriteOutside(t *testing.T) {
	out := t.TempDir()
	if err := shell(`echo x > "$OUT/new"`, "OUT="+out).Run(); err != nil {
		t.Fatal(err)
	}
	if _, ok := readFile(t, filepath.Join(out, "new")); !ok {
		t.Fatal("control write failed")
	}
}

func TestConfinedReadsWhenReadableDirsGiven(t *testing.T) {
	requireLandlock(t, 1)
	ws, out := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "secret"), []byte("s"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "mine"), []byte("m"), 0o644); err != nil {
		t.Fatal(err)
	}
	// What /bin/sh and cat need to run: their binaries and libraries.
	var system []string
	for _, d := range []string{"/usr", "/bin", "/lib", "/lib64", "/etc"} {
		if _, err := os.Stat(d); err == nil {
			system = append(system, d)
		}
	}
	p := Policy{WritableDirs: []string{ws}, ReadableDirs: system}
	tests := []struct {
		name, script string
		wantOK       bool
	}{
		{"reads inside the workspace", `cat "$WS/mine"`, true},
		{"reads a listed system dir", `cat /etc/passwd > /dev/null`, true},
		{"cannot read a file outside", `cat "$OUT/secret"`, false},
		{"cannot list a dir outside", `ls "$OUT"`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runConfined(t, shell(tt.script, "WS="+ws, "OUT="+out), p)
			if ok := r.code == 0; ok != tt.wantOK {
				t.Fatalf("exit %d (stdout %q, stderr %q), want success %v", r.code, r.stdout, r.stderr, tt.wantOK)
			}
			if !tt.wantOK && strings.Contains(r.stdout, "s") {
				t.Fatalf("secret leaked: %q", r.stdout)
			}
		})
	}
}

// program returns a command running this test binary as a program that
// tries one operation (see programOps).
func program(t testing.TB, op, arg string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), envProgram+"="+op+":"+arg)
	return cmd
}

// serve accepts and closes connections on ln until it is closed.
func serve(t *testing.T, ln net.Listener) {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
}

// freePort returns a loopback address whose port was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestConfinedNetwork(t *testing.T) {
	st := requireLandlock(t, 1)
	if !st.Network {
		t.Skipf("network confinement test skipped: %s", st.Reason)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serve(t, tcp)
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	tests := []struct {
		name, op, arg string
	}{
		{"TCP connect to loopback", "dial-tcp", tcp.Addr().String()},
		// MPTCP falls back to plain TCP with any peer, and Landlock's TCP
		// rules do not see it.
		{"MPTCP connect to loopback", "dial-mptcp", tcp.Addr().String()},
		{"TCP bind to a loopback port", "listen-tcp", freePort(t)},
		{"TCP listen on an ephemeral port", "listen-tcp", "127.0.0.1:0"},
		{"UDP send to loopback", "send-udp", udp.LocalAddr().String()},
		{"io_uring, which can create sockets", "io-uring", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if r := runUnconfined(t, program(t, tt.op, tt.arg)); r.code != 0 {
				t.Skipf("unconfined control does not work here either (exit %d, %q)", r.code, r.stderr)
			}
			denied := runConfined(t, program(t, tt.op, tt.arg), Policy{WritableDirs: []string{t.TempDir()}})
			if denied.code != 3 {
				t.Errorf("Network=false: exit %d (stderr %q), want 3 (tried and refused)", denied.code, denied.stderr)
			}
			allowed := runConfined(t, program(t, tt.op, tt.arg), Policy{WritableDirs: []string{t.TempDir()}, Network: true})
			if allowed.code != 0 {
				t.Errorf("Network=true: exit %d (stderr %q), want 0", allowed.code, allowed.stderr)
			}
		})
	}
}

// Unix sockets stay usable without network: programs rely on them locally.
func TestConfinedWithoutNetworkKeepsUnixSockets(t *testing.T) {
	requireLandlock(t, 1)
	dir := t.TempDir()
	ln, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	serve(t, ln)
	r := runConfined(t, program(t, "dial-unix", filepath.Join(dir, "s")), Policy{})
	if r.code != 0 {
		t.Fatalf("exit %d (stderr %q)", r.code, r.stderr)
	}
}

func TestConfinedScopes(t *testing.T) {
	requireLandlock(t, 6)
	name := "@toolgate-sandbox-test-" + strconv.Itoa(os.Getpid())
	ln, err := net.Listen("unix", name)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, ln)
	pid := strconv.Itoa(os.Getpid())
	tests := []struct {
		name    string
		cmd     func() *exec.Cmd
		network bool
		wantOK  bool
	}{
		{"cannot signal the gateway", func() *exec.Cmd { return shell("kill -0 " + pid) }, false, false},
		{"cannot signal the gateway even with Network", func() *exec.Cmd { return shell("kill -0 " + pid) }, true, false},
		{"can signal its own children", func() *exec.Cmd { return shell(`sleep 5 & kill $!`) }, false, true},
		{"abstract unix socket outside denied without Network", func() *exec.Cmd { return program(t, "dial-unix", name) }, false, false},
		{"abstract unix socket allowed with Network", func() *exec.Cmd { return program(t, "dial-unix", name) }, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runConfined(t, tt.cmd(), Policy{WritableDirs: []string{t.TempDir()}, Network: tt.network})
			if ok := r.code == 0; ok != tt.wantOK {
				t.Fatalf("exit %d (stderr %q), want success %v", r.code, r.stderr, tt.wantOK)
			}
		})
	}
	if err := shell("kill -0 " + pid).Run(); err != nil {
		t.Fatalf("unconfined control cannot signal either: %v", err)
	}
	if r := runUnconfined(t, program(t, "dial-unix", name)); r.code != 0 {
		t.Fatalf("unconfined control cannot reach the abstract socket: exit %d %q", r.code, r.stderr)
	}
}

// A failure to apply the confinement is fatal: exit 126, the program does
// not run, and the message names no host path.
func TestConfinementFailureRunsNothing(t *testing.T) {
	requireLandlock(t, 1)
	ws := t.TempDir()
	missing := filepath.Join(ws, "no-such-dir")
	marker := filepath.Join(ws, "ran")
	r := runConfined(t, shell(`echo ran > "$M"`, "M="+marker), Policy{WritableDirs: []string{ws, missing}})
	if r.code != ExitConfineFailed {
		t.Fatalf("exit %d (stderr %q), want %d", r.code, r.stderr, ExitConfineFailed)
	}
	if _, ok := readFile(t, marker); ok {
		t.Fatal("the program ran although confinement failed")
	}
	if !strings.HasPrefix(r.stderr, "sandbox-exec: ") || strings.Contains(r.stderr, ws) {
		t.Fatalf("stderr = %q: want a short reason without paths", r.stderr)
	}
}

// The confined process is the program itself, in the caller's directory,
// with the caller's environment, argv[0] and exit status.
func TestConfinedProgramKeepsItsIdentity(t *testing.T) {
	requireLandlock(t, 1)
	ws := t.TempDir()
	cmd := shell(`pwd; echo "$FOO"; exit 7`, "FOO=bar")
	cmd.Dir = ws
	r := runConfined(t, cmd, Policy{WritableDirs: []string{ws}})
	if r.code != 7 || r.stdout != ws+"\nbar\n" {
		t.Fatalf("exit %d, stdout %q (stderr %q)", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, envHelper) {
		t.Fatal("helper environment leaked")
	}

	named := program(t, "argv0", "")
	named.Args = []string{"custom-name"}
	if r := runConfined(t, named, Policy{}); r.code != 0 || r.stdout != "custom-name" {
		t.Fatalf("argv[0] = %q (exit %d, stderr %q)", r.stdout, r.code, r.stderr)
	}

	missing := &exec.Cmd{Path: "toolgate-no-such-program-7f3a", Args: []string{"x"}}
	if r := runConfined(t, missing, Policy{}); r.code != ExitNotFound {
		t.Fatalf("missing program: exit %d (stderr %q), want %d", r.code, r.stderr, ExitNotFound)
	}
}
