package sandbox

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

var (
	landlockV6 = Status{Mechanism: MechanismLandlock, ABI: 6, Filesystem: true, Network: true}
	noneStatus = Status{Mechanism: MechanismNone, Reason: "kernel has no Landlock support"}
)

func TestWrapRewritesCommandForHelper(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		path   string
		argv   []string
		policy Policy
		want   []string
	}{
		{
			name:   "writable workspace, network denied",
			path:   "/usr/bin/git",
			argv:   []string{"git", "log", "-1"},
			policy: Policy{WritableDirs: []string{"/srv/ws/acme"}},
			want:   []string{"/opt/gateway", "sandbox-exec", "--write=/srv/ws/acme", "--argv0=git", "--", "/usr/bin/git", "log", "-1"},
		},
		{
			name:   "network allowed, reads restricted, several dirs",
			path:   "/bin/sh",
			argv:   []string{"/bin/sh", "-c", "echo hi"},
			policy: Policy{WritableDirs: []string{"/a", "/b/"}, ReadableDirs: []string{"/usr"}, Network: true},
			want:   []string{"/opt/gateway", "sandbox-exec", "--write=/a", "--write=/b", "--read=/usr", "--net", "--", "/bin/sh", "-c", "echo hi"},
		},
		{
			name:   "relative directory made absolute against the gateway's cwd",
			path:   "/bin/true",
			argv:   []string{"/bin/true"},
			policy: Policy{WritableDirs: []string{"ws/../ws2"}},
			want:   []string{"/opt/gateway", "sandbox-exec", "--write=" + filepath.Join(cwd, "ws2"), "--", "/bin/true"},
		},
		{
			name:   "empty Args runs the path with no arguments",
			path:   "/bin/true",
			argv:   nil,
			policy: Policy{},
			want:   []string{"/opt/gateway", "sandbox-exec", "--", "/bin/true"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout bytes.Buffer
			stdin := strings.NewReader("in")
			attr := &syscall.SysProcAttr{Setpgid: true}
			extra := []*os.File{os.Stderr}
			cmd := &exec.Cmd{
				Path: tt.path, Args: tt.argv, Dir: "/srv/ws/acme/sub", Env: []string{"PATH=/usr/bin"},
				Stdin: stdin, Stdout: &stdout, Stderr: &stdout, ExtraFiles: extra, SysProcAttr: attr,
			}
			if err := wrap(cmd, tt.policy, "/opt/gateway", landlockV6); err != nil {
				t.Fatal(err)
			}
			if cmd.Path != "/opt/gateway" {
				t.Errorf("Path = %q", cmd.Path)
			}
			if !reflect.DeepEqual(cmd.Args, tt.want) {
				t.Errorf("Args =\n %q\nwant\n %q", cmd.Args, tt.want)
			}
			if cmd.Dir != "/srv/ws/acme/sub" || !reflect.DeepEqual(cmd.Env, []string{"PATH=/usr/bin"}) ||
				cmd.Stdin != stdin || cmd.Stdout != &stdout || cmd.Stderr != &stdout ||
				cmd.SysProcAttr != attr || len(cmd.ExtraFiles) != 1 || cmd.ExtraFiles[0] != os.Stderr {
				t.Errorf("Wrap changed more than Path and Args: %+v", cmd)
			}
		})
	}
}

func TestWrapWithoutMechanismLeavesCommandUnchanged(t *testing.T) {
	cmd := exec.Command("/bin/echo", "hi")
	before := *cmd
	err := wrap(cmd, Policy{WritableDirs: []string{"/srv/ws"}}, "/opt/gateway", noneStatus)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), noneStatus.Reason) {
		t.Errorf("err %q does not carry the reason", err)
	}
	if cmd.Path != before.Path || !reflect.DeepEqual(cmd.Args, before.Args) {
		t.Fatalf("command changed: %q %q", cmd.Path, cmd.Args)
	}
}

func TestWrapRefusesWhatItCannotConfine(t *testing.T) {
	started := exec.Command("/bin/true")
	started.Process = &os.Process{Pid: 1}
	unresolved := exec.Command("toolgate-no-such-program-7f3a")
	tests := []struct {
		name   string
		cmd    *exec.Cmd
		policy Policy
		self   string
	}{
		{name: "already started", cmd: started, self: "/opt/gateway"},
		{name: "program lookup failed", cmd: unresolved, self: "/opt/gateway"},
		{name: "no path", cmd: &exec.Cmd{}, self: "/opt/gateway"},
		{name: "relative helper", cmd: exec.Command("/bin/true"), self: "gateway"},
		{name: "empty directory", cmd: exec.Command("/bin/true"), self: "/opt/gateway", policy: Policy{WritableDirs: []string{""}}},
		{name: "NUL in directory", cmd: exec.Command("/bin/true"), self: "/opt/gateway", policy: Policy{ReadableDirs: []string{"/usr\x00"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, args := tt.cmd.Path, append([]string(nil), tt.cmd.Args...)
			err := wrap(tt.cmd, tt.policy, tt.self, landlockV6)
			if err == nil {
				t.Fatal("Wrap accepted it")
			}
			if errors.Is(err, ErrUnavailable) {
				t.Fatalf("err = %v: must not look like a missing mechanism (the caller would run unconfined)", err)
			}
			if tt.cmd.Path != path || !reflect.DeepEqual(tt.cmd.Args, args) {
				t.Fatalf("command changed: %q %q", tt.cmd.Path, tt.cmd.Args)
			}
		})
	}
}

func TestWrapDefaultsHelperToOwnExecutable(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/true")
	if err := wrap(cmd, Policy{}, "", landlockV6); err != nil {
		t.Fatal(err)
	}
	if cmd.Path != exe || cmd.Args[0] != exe {
		t.Fatalf("helper = %q / %q, want %q", cmd.Path, cmd.Args[0], exe)
	}
}

// Wrap on this machine follows Probe: confined when Landlock answers,
// ErrUnavailable and an unchanged command otherwise.
func TestWrapFollowsProbe(t *testing.T) {
	cmd := exec.Command("/bin/true")
	err := Wrap(cmd, Policy{}, "/opt/gateway")
	st := Probe()
	if st.Mechanism == MechanismNone {
		t.Logf("Landlock unavailable here (%s): confinement tests are skipped", st.Reason)
		if !errors.Is(err, ErrUnavailable) || cmd.Path != "/bin/true" || !reflect.DeepEqual(cmd.Args, []string{"/bin/true"}) {
			t.Fatalf("err = %v, cmd = %q %q: want ErrUnavailable and the command unchanged", err, cmd.Path, cmd.Args)
		}
		return
	}
	if err != nil || cmd.Path != "/opt/gateway" {
		t.Fatalf("err = %v, Path = %q: want a wrapped command", err, cmd.Path)
	}
}
