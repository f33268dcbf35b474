package sandbox

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The layers around a jailed program, attacked as a hostile program would
// (issue 21): its init, the dynamic loader, memory files, set-user-ID
// bits. Each test runs real programs in a real jail.

// The init holds nothing a program could use: no thread of it has a
// capability; it is not dumpable, so its memory, environment, executable
// and descriptors are closed to programs of the same user; its command
// line shows nothing of the host; the signals a program sends it are
// ignored and print nothing.
func TestJailInitHoldsNothing(t *testing.T) {
	w := newJailWorkspace(t)
	progs := lookPaths(t, "python3")
	probe := `import os, signal, glob
def status(path):
    out = {}
    for line in open(path):
        k, _, v = line.partition(":")
        out[k] = v.strip()
    return out
for task in sorted(glob.glob("/proc/1/task/*")):
    s = status(task + "/status")
    print("thread", os.path.basename(task), s["CapInh"], s["CapPrm"], s["CapEff"], s["CapBnd"], s["CapAmb"], s["NoNewPrivs"], s["Seccomp"])
for name in ["mem", "environ", "exe", "maps", "fd/0", "fd/3", "fd/4", "root"]:
    p = "/proc/1/" + name
    try:
        if name in ("exe", "root"):
            print(name, "READ", os.readlink(p))
        elif name.startswith("fd/"):
            print(name, "READ", os.readlink(p))
        else:
            with open(p, "rb") as f:
                print(name, "READ", f.read(64))
    except OSError as e:
        print(name, "no", e.errno)
try:
    f = open("/proc/1/mem", "r+b")
    print("mem-write READ")
except OSError as e:
    print("mem-write no", e.errno)
print("cmdline", open("/proc/1/cmdline", "rb").read().replace(b"\0", b" ").decode())
for sig in [signal.SIGABRT, signal.SIGSEGV, signal.SIGQUIT, signal.SIGTERM, signal.SIGUSR1]:
    os.kill(1, sig)
print("alive", os.getpid())
`
	r := runInJail(t, Jail{Workspace: w.ws, Hide: defaultHide, Programs: progs}, w.ws, progs[0], "-c", probe)
	if r.code != 0 || !strings.Contains(r.out, "alive") {
		t.Fatalf("probe: code %d\n%s", r.code, r.out)
	}
	threads := 0
	for _, line := range strings.Split(r.out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "thread":
			threads++
			for _, caps := range f[2:7] {
				if caps != "0000000000000000" {
					t.Errorf("a thread of the init holds capabilities: %s", line)
				}
			}
			if f[7] != "1" || f[8] != "2" {
				t.Errorf("a thread of the init without no_new_privs or seccomp: %s", line)
			}
		case "mem", "environ", "exe", "maps", "fd/0", "fd/3", "fd/4", "root", "mem-write":
			if f[1] == "READ" {
				t.Errorf("the init's %s is open to programs: %s", f[0], line)
			}
		}
	}
	if threads == 0 {
		t.Errorf("no thread of the init was seen:\n%s", r.out)
	}
	t.Logf("%s", r.out)
	if i := strings.Index(r.out, "cmdline "); i < 0 {
		t.Errorf("no command line:\n%s", r.out)
	} else if line, _, _ := strings.Cut(r.out[i:], "\n"); strings.Contains(line, w.ws) || strings.Contains(line, "/tmp") || strings.Contains(line, "secrets") || strings.Contains(line, "--ws") {
		t.Errorf("the init's command line shows the host or the decision: %s", line)
	}
	for _, leak := range []string{"goroutine", "SIGABRT", "PC=", w.ws} {
		if strings.Contains(r.out, leak) {
			t.Errorf("the output shows %q:\n%s", leak, r.out)
		}
	}
}

// The dynamic loader is executable (every program needs it), but run as a
// program it cannot map one that was not approved: every mount is noexec
// but the approved programs, so perl fails to load. An approved program
// still runs through it.
func TestJailLoaderCannotRunAnUnapprovedProgram(t *testing.T) {
	w := newJailWorkspace(t)
	progs := lookPaths(t, "python3", "true", "perl")
	real, err := filepath.EvalSymlinks(progs[1])
	must(t, err)
	info, err := readELF(real)
	must(t, err)
	if info.interp == "" {
		t.Fatal("true(1) has no ELF interpreter here")
	}
	loader := info.interp
	jl := Jail{Workspace: w.ws, Programs: progs[:2]} // perl is not approved
	r := runInJail(t, jl, w.ws, loader, progs[2], "-e", "print qq(perl ran\\n)")
	if r.code == 0 || strings.Contains(r.out, "perl ran") {
		t.Errorf("the loader ran perl: code %d\n%s", r.code, r.out)
	}
	r = runInJail(t, jl, w.ws, progs[0], "-c", fmt.Sprintf("import os\nos.execv(%q, [%q, %q, '-e', 'print qq(perl ran\\n)'])", loader, loader, progs[2]))
	if r.code == 0 || strings.Contains(r.out, "perl ran") {
		t.Errorf("the loader ran perl for python: code %d\n%s", r.code, r.out)
	}
	r = runInJail(t, jl, w.ws, loader, real)
	if r.code != 0 {
		t.Errorf("the loader could not run an approved program: code %d\n%s", r.code, r.out)
	}
	// A copy of an approved program in the workspace is not approved.
	r = runInJail(t, Jail{Workspace: w.ws, Programs: progs[:2]}, w.ws, progs[0], "-c",
		fmt.Sprintf("import shutil, os\nshutil.copy(%q, 'p')\nos.chmod('p', 0o755)\nos.execv(%q, [%q, './p', '-e', 'print qq(perl ran\\n)'])", progs[2], loader, loader))
	if r.code == 0 || strings.Contains(r.out, "perl ran") {
		t.Errorf("the loader ran a copy of perl from the workspace: code %d\n%s", r.code, r.out)
	}
}

// A program written into memory cannot be run: memory files are created
// non-executable and sealed (MFD_EXEC and legacy executable ones are
// refused), so execveat of one fails.
func TestJailMemfdCannotRunAProgram(t *testing.T) {
	w := newJailWorkspace(t)
	progs := lookPaths(t, "python3", "true")
	probe := fmt.Sprintf(`import os
data = open(%q, "rb").read()
for name, flags in [("plain", 0), ("cloexec", 1), ("exec", 0x10), ("noexec-seal", 0x8 | 1)]:
    try:
        fd = os.memfd_create("x", flags)
    except OSError as e:
        print(name, "create no", e.errno)
        continue
    os.write(fd, data)
    try:
        os.execve(fd, ["x"], {})
    except OSError as e:
        print(name, "exec no", e.errno)
    try:
        os.execv("/proc/self/fd/%%d" %% fd, ["x"])
    except OSError as e:
        print(name, "exec-proc no", e.errno)
print("done")
`, progs[1])
	r := runInJail(t, Jail{Workspace: w.ws, Programs: progs}, w.ws, progs[0], "-c", probe)
	if r.code != 0 || !strings.Contains(r.out, "done") {
		t.Fatalf("a memory file ran (or the probe failed): code %d\n%s", r.code, r.out)
	}
	t.Logf("%s", r.out)
	for _, want := range []string{"plain create no", "cloexec create no", "exec create no", "noexec-seal exec no", "noexec-seal exec-proc no"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("want %q in:\n%s", want, r.out)
		}
	}
}

// No file a jail creates is a set-user-ID or set-group-ID program on the
// host, by any route that sets a mode, and it belongs to the jail's user.
func TestJailCannotMakeSetuidFiles(t *testing.T) {
	w := newJailWorkspace(t)
	progs := lookPaths(t, "python3", "cp", "chmod", "id", "sh")
	probe := fmt.Sprintf(`import os, stat
import shutil
shutil.copy(%q, "x")
for name, f in [
    ("chmod", lambda: os.chmod("x", 0o6755)),
    ("chmod-gid", lambda: os.chmod("x", 0o2755)),
    ("fchmod", lambda: os.fchmod(os.open("x", os.O_RDONLY), 0o4755)),
    ("open", lambda: os.open("y", os.O_CREAT | os.O_WRONLY, 0o4755)),
    ("mknod", lambda: os.mknod("z", 0o4755 | stat.S_IFREG)),
    ("mkdir-sgid-then-chmod", lambda: (os.mkdir("d"), os.chmod("d", 0o2755))),
]:
    try:
        f()
        print(name, "done")
    except OSError as e:
        print(name, "no", e.errno)
`, progs[3])
	r := runInJail(t, Jail{Workspace: w.ws, Programs: progs}, w.ws, progs[0], "-c", probe)
	if r.code != 0 {
		t.Fatalf("probe: code %d\n%s", r.code, r.out)
	}
	t.Logf("%s", r.out)
	r2 := runInJail(t, Jail{Workspace: w.ws, Programs: progs}, w.ws, progs[4], "-c", "cp /usr/bin/id cp-id; chmod 6755 cp-id; echo chmod=$?; chmod u+s cp-id; echo chmod-u=$?")
	for _, want := range []string{"chmod=1", "chmod-u=1"} {
		if !strings.Contains(r2.out, want) {
			t.Errorf("want %q in:\n%s", want, r2.out)
		}
	}
	uid, gid := testJailer(t).UID()
	err := filepath.Walk(w.ws, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		if fi.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("%s is %v on the host:\n%s\n%s", p, fi.Mode(), r.out, r2.out)
		}
		if st := fi.Sys().(*syscall.Stat_t); fi.Name() != "ws" && (int(st.Uid) != uid || int(st.Gid) != gid) {
			t.Errorf("%s belongs to %d:%d on the host, want the jail's %d:%d", p, st.Uid, st.Gid, uid, gid)
		}
		return nil
	})
	must(t, err)
}
