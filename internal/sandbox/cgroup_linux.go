package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// Per-jail memory through a cgroup v1 memory controller.
//
// RLIMIT_DATA bounds each process of a jail, not the jail: 128 processes
// of 1 GiB each are 128 GiB, and a program that hits it sees malloc fail
// rather than being stopped with a note. Where the gateway may create
// cgroups under its own memory cgroup (a root gateway on a cgroup v1 host,
// or a container given its cgroup), every jail gets a cgroup of its own
// whose memory.limit_in_bytes (and memsw, when swap is accounted) is the
// jail's memory limit: the kernel's OOM killer ends the jail's biggest
// process when the jail as a whole exceeds it, and the jail's init reads
// the cgroup's oom_kill counter to say "[killed: memory limit]".
//
// The helper's first stage moves its second stage (which builds the jail
// and is the jail's init) into the cgroup through the cgroup.procs file
// the gateway opened for it, and the second stage starts the program only
// once that is done, so nothing of the program runs outside it. The gateway removes the cgroup once the jail's init has
// exited (the PID namespace then kills every process left).
//
// cgroup v2 (unified) needs the gateway's own cgroup delegated and the
// gateway moved to a leaf before memory can be enabled for children; that
// is not done yet, and such hosts keep the per-process RLIMIT_DATA (the
// status says so).

// MechanismCgroupMemory names per-jail memory accounting in JailStatus.
const MechanismCgroupMemory = "cgroup-memory"

// cgroupParent is the folder, under the gateway's memory cgroup, that
// holds one cgroup per running jail.
const cgroupParent = "toolgate-jails"

// cgroupSeq numbers the jails' cgroups of this process, across Jailers (a
// closed Jailer may leave a cgroup its jail has not left yet).
var cgroupSeq atomic.Uint64

type memCgroups struct {
	dir   string // .../memory/<own path>/toolgate-jails
	swap  bool   // memory.memsw.limit_in_bytes exists
	owner string // this gateway process: "pid.start"
}

// findMemCgroups locates the gateway's cgroup v1 memory controller and
// prepares the folder jails' cgroups go in. It returns nil and a reason
// when per-jail memory is not available.
func findMemCgroups(owner string) (*memCgroups, string) {
	dir, why := jailsCgroupV1("memory", "memory.limit_in_bytes", 0o700)
	if dir == "" {
		return nil, why
	}
	m := &memCgroups{dir: dir}
	if _, err := os.Stat(filepath.Join(dir, "memory.memsw.limit_in_bytes")); err == nil {
		m.swap = true
	}
	m.owner = owner
	// Cgroups left by a gateway that did not exit cleanly: those of a
	// gateway process that no longer runs lose their processes and go;
	// another live gateway's stay.
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			o, ok := cgroupOwner(e.Name())
			if !e.IsDir() || !ok || processAlive(o) {
				continue
			}
			killCgroup(filepath.Join(dir, e.Name()))
		}
	}
	return m, ""
}

// jailsCgroupV1 makes the folder (mode perm) for the jails' cgroups under
// the gateway's own cgroup of the v1 controller, and checks that file, a
// file of the controller, is there. It returns "" and a reason when the
// controller cannot be used.
func jailsCgroupV1(controller, file string, perm os.FileMode) (string, string) {
	own, err := ownCgroupV1(controller)
	if err != nil {
		return "", err.Error()
	}
	mnt, err := cgroupV1Mount(controller)
	if err != nil {
		return "", err.Error()
	}
	dir := filepath.Join(mnt, filepath.Clean("/"+own), cgroupParent)
	if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, os.ErrExist) {
		return "", "the gateway's " + controller + " cgroup is not writable: " + errnoText(err)
	}
	if _, err := os.Stat(filepath.Join(dir, file)); err != nil {
		return "", "no " + file + " in the gateway's " + controller + " cgroup"
	}
	// A folder another user made (root, for an earlier gateway) is no use
	// unless this gateway may make cgroups in it.
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return "", "the gateway's " + controller + " cgroup is not writable: " + errnoText(err)
	}
	return dir, ""
}

// ownCgroupV1 returns this process's path in the v1 hierarchy of
// controller.
func ownCgroupV1(controller string) (string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", errors.New("no /proc/self/cgroup")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == controller {
				return parts[2], nil
			}
		}
	}
	return "", fmt.Errorf("no cgroup v1 %s controller", controller)
}

// cgroupV1Mount finds where the v1 hierarchy of controller is mounted.
func cgroupV1Mount(controller string) (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", errors.New("no /proc/self/mountinfo")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint opts [optional...] - fstype source superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		fields, tail := strings.Fields(pre), strings.Fields(post)
		if len(fields) < 5 || len(tail) < 3 || tail[0] != "cgroup" || fields[3] != "/" {
			continue
		}
		for _, o := range strings.Split(tail[2], ",") {
			if o == controller {
				return unescapeMount(fields[4]), nil
			}
		}
	}
	return "", fmt.Errorf("the cgroup v1 %s hierarchy is not mounted here", controller)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// jailCgroup is one jail's memory cgroup: the files the helper gets and
// the folder the gateway removes afterwards.
type jailCgroup struct {
	dir   string
	procs *os.File // cgroup.procs, opened for writing
	oom   *os.File // memory.oom_control, for the init to read at the end
}

// create makes a cgroup limited to bytes of memory (and of memory+swap).
func (m *memCgroups) create(bytes int64) (*jailCgroup, error) {
	name := fmt.Sprintf("j%s-%d", m.owner, cgroupSeq.Add(1))
	dir := filepath.Join(m.dir, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox: creating the jail's cgroup: %v", errnoText(err))
	}
	cg := &jailCgroup{dir: dir}
	fail := func(err error) (*jailCgroup, error) {
		cg.close()
		cg.remove()
		return nil, fmt.Errorf("sandbox: the jail's cgroup: %v", err)
	}
	v := []byte(strconv.FormatInt(bytes, 10))
	if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), v, 0); err != nil {
		return fail(err)
	}
	if m.swap {
		if err := os.WriteFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), v, 0); err != nil {
			return fail(err)
		}
	}
	var err error
	if cg.procs, err = os.OpenFile(filepath.Join(dir, "cgroup.procs"), os.O_WRONLY, 0); err != nil {
		return fail(err)
	}
	// The file, not the folder: the jail's user may not search a folder
	// of the gateway's.
	if cg.oom, err = os.Open(filepath.Join(dir, "memory.oom_control")); err != nil {
		return fail(err)
	}
	return cg, nil
}

// close closes the gateway's copies of the files given to the helper.
func (cg *jailCgroup) close() {
	if cg.procs != nil {
		cg.procs.Close()
		cg.procs = nil
	}
	if cg.oom != nil {
		cg.oom.Close()
		cg.oom = nil
	}
}

// remove deletes the cgroup folder; it fails while processes remain.
func (cg *jailCgroup) remove() error { return unix.Rmdir(cg.dir) }

// cgroupOwner parses the owner of a jail's cgroup from its name
// ("j<pid>.<start>-<seq>").
func cgroupOwner(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "j")
	if !ok {
		return "", false
	}
	i := strings.LastIndexByte(rest, '-')
	if i <= 0 {
		return "", false
	}
	return rest[:i], true
}

// killCgroup kills every process of the cgroup folder dir and removes it.
func killCgroup(dir string) {
	for range 3 {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			break
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
				_ = unix.Kill(pid, unix.SIGKILL)
			}
		}
		if unix.Rmdir(dir) == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = unix.Rmdir(dir)
}

// removeWhenEmpty removes the cgroup once the kernel has taken the jail's
// last process out of it (the init just exited; the rest of its PID
// namespace is being killed), trying for a bounded time in the background
// (bg's); the start-up sweep removes what is left.
func (cg *jailCgroup) removeWhenEmpty(bg *cleanups) {
	if err := cg.remove(); err == nil || errors.Is(err, unix.ENOENT) {
		return
	}
	bg.run(func() { cg.retryRemove(bg, 12) })
}

// retryRemove tries to remove the cgroup up to tries times, backing off
// from 10 ms to 1 s. When bg stops (the Jailer closes, its lifeline ends
// every jail), it tries every 10 ms for at most closingRemoval instead.
func (cg *jailCgroup) retryRemove(bg *cleanups, tries int) {
	delay := 10 * time.Millisecond
	for i := 0; i < tries; i++ {
		if err := cg.remove(); err == nil || errors.Is(err, unix.ENOENT) {
			return
		}
		if !bg.wait(delay) {
			break
		}
		if delay < time.Second {
			delay *= 2
		}
	}
	if !bg.closing() {
		return // given up: the next start's sweep removes it
	}
	for end := time.Now().Add(closingRemoval); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if err := cg.remove(); err == nil || errors.Is(err, unix.ENOENT) {
			return
		}
	}
}

// closingRemoval bounds how long a closing Jailer waits for the kernel to
// empty a jail's cgroup; what is left, the next start's sweep removes.
const closingRemoval = 2 * time.Second

// removeAfter waits (in bg) for the process pid (the jail's init) to exit,
// then removes the cgroup once the kernel has taken the jail's other
// processes out of it. It does not reap pid. When bg stops first, it makes
// one attempt and returns.
func (cg *jailCgroup) removeAfter(bg *cleanups, pid int) {
	fd, err := unix.PidfdOpen(pid, 0)
	bg.run(func() {
		if err == nil {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}, {Fd: int32(bg.quitR.Fd()), Events: unix.POLLIN}}
			for {
				if _, err := unix.Poll(fds, -1); !errors.Is(err, unix.EINTR) {
					break
				}
			}
			unix.Close(fd)
		}
		cg.retryRemove(bg, 40)
	})
}

// moveToCgroup moves process pid (all its threads) into the cgroup whose
// cgroup.procs is open as fd, and closes fd.
func moveToCgroup(fd, pid int) error {
	_, err := unix.Write(fd, []byte(strconv.Itoa(pid)))
	unix.Close(fd)
	if err != nil {
		return fmt.Errorf("joining the jail's cgroup: %v", errnoText(err))
	}
	return nil
}

// awaitCgroup waits until stage 1 says, on the pipe open as fd, that this
// process is in the jail's cgroup; EOF without it means it is not.
func awaitCgroup(fd int) error {
	defer unix.Close(fd)
	var b [1]byte
	for {
		n, err := unix.Read(fd, b[:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if n == 1 && b[0] == '1' {
			return nil
		}
		return errors.New("not in the jail's cgroup")
	}
}

// oomKilled reports whether the kernel's OOM killer ended a process of
// the cgroup whose memory.oom_control is open as fd.
func oomKilled(fd int) bool {
	buf := make([]byte, 512)
	n, _ := unix.Pread(fd, buf, 0)
	if n <= 0 {
		return false
	}
	for _, line := range strings.Split(string(buf[:n]), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			k, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return k > 0
		}
	}
	return false
}
