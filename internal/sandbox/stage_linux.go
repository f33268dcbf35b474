package sandbox

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// A jail's processes, from the gateway down:
//
//	gateway ─ stage 1 ─ stage 2 ══exec══ init (PID 1) ─ payload ─ programs
//
// Stage 1 runs in the gateway's namespaces as the gateway's user. It asks
// the kernel for the jail's namespaces for stage 2, moves stage 2 into the
// jail's cgroups, relays a stop request (SIGTERM) to the init, and dies
// with the gateway: it watches the gateway's lifeline (a pipe whose write
// end only the gateway holds), and kills stage 2 when it breaks.
//
// Stage 2 is PID 1 of the new namespaces, with capabilities inside its own
// user namespace only. It builds the jail (build_linux.go), sets the
// limits, drops every capability, sets no_new_privs, restricts execution
// with Landlock and adds the seccomp filter — all on one thread — and then
// execve's the helper again as the jail's init. The exec is what leaves no
// thread holding a capability: a Go process has several threads and
// capabilities are per thread, but execve replaces them all by one that
// has the credentials of the thread that called it.
//
// The init starts nothing but the payload, before which it makes itself
// non-dumpable (its memory, environment and descriptors are closed to the
// programs, which run as the same user), ignores every signal a program
// could send it, and keeps its own output (diagnostics, a crash) on the
// gateway's diagnostic pipe, never in the run's output. It reaps orphans,
// relays a stop to every process of the jail, and exits when the payload
// ends — at which point the kernel kills everything left in the PID
// namespace. It exits at once when stage 1 (its parent pipe) or the
// gateway (the lifeline) is gone.
//
// Descriptors from stage 1 on: 0, 1, 2 standard input, output and the
// diagnostic pipe; 3 the helper binary; 4 the job spec; 5 the lifeline;
// 6 the payload's standard error (when it has its own). Stage 2 adds 7,
// the read end of its parent pipe, 8 the memory cgroup's oom_control, 9
// the pipe on which stage 1 says stage 2 is in the jail's cgroups and 10
// the workspace's mount tree (a root gateway clones it, so that the jail's
// user needs no access to the folders above the workspace).
const (
	fdHelper   = 3
	fdSpec     = 4
	fdLifeline = 5
	fdStderr   = 6
	fdParent   = 7
	fdOOM      = 8
	fdJoined   = 9
	fdTree     = 10
)

// Stderr modes of a run (jobSpec.Stderr).
const (
	stderrStdout = "stdout" // one stream
	stderrDiag   = "diag"   // the caller's own stderr, which is also fd 2
	stderrOwn    = "own"    // fd 6
)

// stageFlags are the helper's flags of stages 1 and 2.
type stageFlags struct {
	owner    string
	memProcs int
	cpuProcs int
	oom      int
	tree     int
	joined   bool
}

func parseStageFlags(args []string) (stageFlags, error) {
	f := stageFlags{memProcs: -1, cpuProcs: -1, oom: -1, tree: -1}
	fs := flag.NewFlagSet(SubCommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&f.owner, "owner", "", "the gateway that started the jail")
	fs.IntVar(&f.memProcs, "mem-procs", -1, "descriptor of the jail's memory cgroup.procs")
	fs.IntVar(&f.cpuProcs, "cpu-procs", -1, "descriptor of the tenant's cpu cgroup.procs")
	fs.IntVar(&f.oom, "oom", -1, "descriptor of the jail's memory.oom_control")
	fs.IntVar(&f.tree, "ws-tree", -1, "descriptor of the workspace's mount tree")
	fs.BoolVar(&f.joined, "joined", false, "stage 1 says on fd 9 when stage 2 is in its cgroups")
	if err := fs.Parse(args); err != nil || fs.NArg() != 0 {
		return f, errors.New("bad arguments")
	}
	return f, nil
}

// readSpec reads the job spec from the sealed file at fd.
func readSpec(fd int) (*jobSpec, error) {
	b, err := readAllAt(fd, 8<<20)
	if err != nil {
		return nil, fmt.Errorf("reading the job: %v", errnoText(err))
	}
	var s jobSpec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("reading the job: %v", err)
	}
	return &s, nil
}

// readAllAt reads a whole file from offset 0 without moving its offset.
func readAllAt(fd, max int) ([]byte, error) {
	var buf []byte
	chunk := make([]byte, 64<<10)
	for off := int64(0); ; {
		n, err := unix.Pread(fd, chunk, off)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return buf, nil
		}
		buf = append(buf, chunk[:n]...)
		off += int64(n)
		if len(buf) > max {
			return nil, errors.New("job spec too large")
		}
	}
}

// diag writes one diagnostic line (JSON) on fd 2.
func diag(kind string, err error) {
	b, _ := json.Marshal(map[string]string{"stage": kind, "error": err.Error()})
	_, _ = os.Stderr.Write(append(b, '\n'))
}

// watchLifeline calls gone once the pipe at fd reaches end of file (its
// only writer, the gateway, is gone). It returns at once.
func watchLifeline(fd int, gone func()) {
	go func() {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			_, err := unix.Poll(fds, -1)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil || fds[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
				gone()
				return
			}
			// Nothing is ever written; drain if something was.
			var b [64]byte
			if n, _ := unix.Read(fd, b[:]); n == 0 {
				gone()
				return
			}
		}
	}()
}

// runStage1 is the helper as the gateway starts it.
func runStage1(args []string) int {
	fail := func(err error) int {
		diag("stage1", fmt.Errorf("cannot build jail: %v", err))
		return ExitConfineFailed
	}
	f, err := parseStageFlags(args)
	if err != nil {
		return fail(err)
	}
	spec, err := readSpec(fdSpec)
	if err != nil {
		return fail(err)
	}
	// The thread that starts stage 2 is its parent for Pdeathsig: keep it.
	runtime.LockOSThread()
	parentR, parentW, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	extra := []*os.File{
		os.NewFile(fdHelper, "helper"), os.NewFile(fdSpec, "spec"), os.NewFile(fdLifeline, "lifeline"),
		os.NewFile(fdStderr, "stderr"), parentR,
	}
	stage2 := []string{"toolgate-jail", SubCommand, "--stage2"}
	if f.oom >= 0 {
		extra = append(extra, os.NewFile(uintptr(f.oom), "oom"))
		stage2 = append(stage2, "--oom="+strconv.Itoa(fdOOM))
	} else {
		extra = append(extra, nil) // fd 8 stays closed
	}
	var joinedW *os.File
	if f.memProcs >= 0 || f.cpuProcs >= 0 {
		r, w, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		extra = append(extra, r)
		joinedW = w
		stage2 = append(stage2, "--joined")
		defer r.Close()
	} else {
		extra = append(extra, nil) // fd 9 stays closed
	}
	if f.tree >= 0 {
		extra = append(extra, os.NewFile(uintptr(f.tree), "workspace"))
		stage2 = append(stage2, "--ws-tree="+strconv.Itoa(fdTree))
	}
	cmd := exec.Command("/proc/self/fd/3")
	cmd.Args = stage2
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = extra
	cmd.Env = []string{}
	uid, gid := os.Getuid(), os.Getgid()
	spa := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if spec.Jail.UID >= 0 {
		// The gateway runs as root: the jail's user is mapped to itself;
		// stage 2 starts as root (no id in the new namespace, so no
		// privilege there but its ambient capabilities), builds the jail,
		// then becomes that user. Setting the ids here instead would make
		// stage 2 non-dumpable and /proc/self/fd/3 unreachable.
		uid, gid = spec.Jail.UID, spec.Jail.GID
		spa.GidMappingsEnableSetgroups = true
	}
	spa.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
		syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP
	if !spec.Jail.Network {
		spa.Cloneflags |= syscall.CLONE_NEWNET
	}
	spa.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	spa.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	spa.AmbientCaps = jailCaps
	cmd.SysProcAttr = spa
	// A stop request (SIGTERM, SIGINT, SIGHUP from the gateway) is relayed
	// to the init; nothing else ends stage 1 but its stage 2 ending, the
	// gateway going away, or SIGKILL.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE)
	if err := cmd.Start(); err != nil {
		return fail(errors.New(errnoText(err)))
	}
	parentR.Close()
	pid := cmd.Process.Pid
	watchLifeline(fdLifeline, func() {
		_ = unix.Kill(pid, unix.SIGKILL)
		os.Exit(128 + int(unix.SIGKILL))
	})
	go func() {
		for s := range sigs {
			switch s {
			case syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP:
				_, _ = parentW.Write([]byte{'T'})
			}
		}
	}()
	if joinedW != nil {
		var err error
		if f.memProcs >= 0 {
			err = moveToCgroup(f.memProcs, pid)
		}
		if err == nil && f.cpuProcs >= 0 {
			err = moveToCgroup(f.cpuProcs, pid)
		}
		if err == nil {
			_, err = joinedW.Write([]byte{'1'})
		}
		joinedW.Close()
		if err != nil {
			// Stage 2 reads EOF and never starts anything.
			diag("stage1", fmt.Errorf("cannot build jail: %v", err))
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return fail(errors.New(errnoText(err)))
}

// runStage2 builds the jail and becomes its init. It returns only on
// failure, with the status to exit with.
func runStage2(args []string) int {
	fail := func(err error) int {
		diag("stage2", fmt.Errorf("cannot build jail: %v", err))
		return ExitConfineFailed
	}
	// Namespaces, Landlock, no_new_privs and seccomp are set on this
	// thread, and the exec below keeps only this thread.
	runtime.LockOSThread()
	// A signal before the init exists must not end stage 2 in the middle.
	signal.Notify(make(chan os.Signal, 8), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE)
	f, err := parseStageFlags(args)
	if err != nil {
		return fail(err)
	}
	spec, err := readSpec(fdSpec)
	if err != nil {
		return fail(err)
	}
	js := &spec.Jail
	if js.UID >= 0 {
		// The gateway's root is no id in this user namespace: become the
		// jail's user first (files cannot be created by an unmapped id).
		// The capabilities stay, as the old uid was not this namespace's
		// root. syscall's set*id apply to every thread of the process.
		if err := errors.Join(syscall.Setgroups(nil), syscall.Setresgid(js.GID, js.GID, js.GID), syscall.Setresuid(js.UID, js.UID, js.UID)); err != nil {
			return fail(fmt.Errorf("becoming the jail's user: %v", errnoText(err)))
		}
		// A change of credentials clears the parent-death signal: set it
		// again, then make sure stage 1 did not die in between.
		if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
			return fail(errors.New(errnoText(err)))
		}
	}
	if parentGone() {
		return 128 + int(unix.SIGKILL)
	}
	dir := spec.Dir
	if dir == "" {
		dir = js.MountAt
	}
	rights, err := buildJail(js, dir, f.tree)
	if err != nil {
		return fail(err)
	}
	if f.joined {
		if err := awaitCgroup(fdJoined); err != nil {
			return fail(err)
		}
	}
	// Limits last: they bind the init and everything it starts.
	if err := setLimits(js.Limits, f.oom >= 0); err != nil {
		return fail(fmt.Errorf("limits: %v", err))
	}
	// Only these descriptors reach the init, and none of them reaches a
	// program (the init marks them close-on-exec).
	keep := []int{0, 1, 2, fdHelper, fdSpec, fdLifeline, fdStderr, fdParent}
	if f.oom >= 0 {
		keep = append(keep, fdOOM)
	}
	if err := keepOnly(keep); err != nil {
		return fail(err)
	}
	if err := dropCaps(); err != nil {
		return fail(fmt.Errorf("dropping capabilities: %v", err))
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("no_new_privs: %v", errnoText(err)))
	}
	if err := restrictExec(rights, fdHelper, js.Network); err != nil {
		return fail(fmt.Errorf("landlock: %v", err))
	}
	if err := installJailFilter(js.Network); err != nil {
		return fail(fmt.Errorf("seccomp: %v", errnoText(err)))
	}
	initArgs := []string{"toolgate-jail", SubCommand, "--init"}
	if f.oom >= 0 {
		initArgs = append(initArgs, "--oom="+strconv.Itoa(fdOOM))
	}
	err = unix.Exec("/proc/self/fd/3", initArgs, []string{"GOTRACEBACK=none", "GOMAXPROCS=2"})
	return fail(fmt.Errorf("starting the init: %v", errnoText(err)))
}

// parentGone reports whether stage 1 is gone (its end of the parent pipe
// is closed).
func parentGone() bool {
	fds := []unix.PollFd{{Fd: fdParent, Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0 && fds[0].Revents&(unix.POLLHUP|unix.POLLERR) != 0
}

// keepOnly marks every descriptor from 3 on close-on-exec except keep,
// whose flag it clears.
func keepOnly(keep []int) error {
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return errors.New(errnoText(err))
	}
	for _, fd := range keep {
		if fd < 3 {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0); err != nil {
			return fmt.Errorf("descriptor %d: %v", fd, errnoText(err))
		}
	}
	return nil
}

// initReport is the init's own line on the diagnostic pipe when the
// payload ends.
type initReport struct {
	Status int  `json:"status"`
	OOM    bool `json:"oom,omitempty"`
}

// runInit is the jail's PID 1, without any privilege. See the comment at
// the top of this file.
func runInit(args []string) int {
	// First of all: no process of the jail's user may read or write this
	// one's memory, environment or descriptors.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	_ = unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	sigs := make(chan os.Signal, 64)
	signal.Notify(sigs)
	go func() {
		for range sigs {
			// Ignored: a program's kill -ABRT 1 does nothing.
		}
	}()
	f, err := parseStageFlags(args)
	if err != nil {
		diag("init", err)
		return ExitConfineFailed
	}
	spec, err := readSpec(fdSpec)
	if err != nil {
		diag("init", err)
		return ExitConfineFailed
	}
	watchLifeline(fdLifeline, func() { os.Exit(128 + int(unix.SIGKILL)) })
	stopping := make(chan struct{})
	go func() {
		var b [1]byte
		for {
			n, err := unix.Read(fdParent, b[:])
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if n == 1 && b[0] == 'T' {
				select {
				case <-stopping:
				default:
					close(stopping)
					// Every process of the jail but this one.
					_ = unix.Kill(-1, unix.SIGTERM)
				}
				continue
			}
			// Stage 1 is gone: so is the jail.
			os.Exit(128 + int(unix.SIGKILL))
		}
	}()
	pid, err := startPayload(spec)
	if err != nil {
		diag("init", err)
		return ExitNotFound
	}
	// The payload has its copies; the init needs none of the streams.
	unix.Close(0)
	unix.Close(1)
	unix.Close(fdStderr)
	code := reap(pid, stopping)
	rep := initReport{Status: code}
	if f.oom >= 0 && code != 0 {
		rep.OOM = oomKilled(f.oom)
	}
	if spec.Stderr != stderrDiag {
		// The gateway reads the diagnostic pipe for this line.
		b, _ := json.Marshal(rep)
		_, _ = os.Stderr.Write(append(b, '\n'))
	}
	if spec.Stderr == stderrDiag {
		// The program's own stderr (a caller without a report reader):
		// say why the jail ended it.
		switch {
		case rep.OOM:
			io.WriteString(os.Stderr, "\n[killed: memory limit]\n")
		case code == 128+int(unix.SIGXCPU):
			io.WriteString(os.Stderr, "\n[killed: CPU time limit]\n")
		case code == 128+int(unix.SIGXFSZ):
			io.WriteString(os.Stderr, "\n[killed: file size limit]\n")
		}
	}
	return code
}

// startPayload starts the run as the init's only child.
func startPayload(s *jobSpec) (int, error) {
	stderr := uintptr(fdStderr)
	switch s.Stderr {
	case stderrStdout:
		stderr = 1
	case stderrDiag:
		stderr = 2
	}
	dir := s.Dir
	if dir == "" {
		dir = s.Jail.MountAt
	}
	if s.Payload == "" {
		pid, err := syscall.ForkExec(s.Program, s.Args, &syscall.ProcAttr{Dir: dir, Env: s.Env, Files: []uintptr{0, 1, stderr}})
		if err != nil {
			if errors.Is(err, syscall.ENOENT) {
				return 0, errors.New("command not found")
			}
			if errors.Is(err, syscall.EACCES) {
				return 0, errors.New("cannot run command: not an approved program")
			}
			return 0, fmt.Errorf("cannot run command: %v", errnoText(err))
		}
		return pid, nil
	}
	// The payload is the helper again; it gets the spec as fd 3 and the
	// diagnostic pipe as fd 4 for its report. The path is resolved after
	// the descriptors are in place: the helper is fd 5 then.
	return syscall.ForkExec("/proc/self/fd/5", []string{"toolgate-jail", SubCommand, "--payload=" + s.Payload},
		&syscall.ProcAttr{Dir: dir, Env: []string{"GOTRACEBACK=none", "GOMAXPROCS=2"}, Files: []uintptr{0, 1, stderr, fdSpec, 2, fdHelper}})
}

// reap is the init's loop: it reaps every child (orphans of the payload
// included) until the payload ends, and returns its status in the shell's
// convention. After a stop request it waits for the rest of the jail too,
// until stage 1 escalates (its end of the parent pipe closes).
func reap(pid int, stopping <-chan struct{}) int {
	code := -1
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil { // ECHILD: nothing left
			if code < 0 {
				return ExitConfineFailed
			}
			return code
		}
		if wpid == pid {
			switch {
			case ws.Exited():
				code = ws.ExitStatus()
			case ws.Signaled():
				code = 128 + int(ws.Signal())
			default:
				continue
			}
			select {
			case <-stopping:
				// Let the rest of the jail handle SIGTERM.
			default:
				return code
			}
		}
	}
}

// runPayload runs a payload of the helper inside the jail.
func runPayload(name string, payloads Payloads) int {
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	fn := payloads[name]
	if fn == nil {
		diag("payload", fmt.Errorf("no payload %q in this helper", name))
		return ExitConfineFailed
	}
	spec, err := readSpec(3)
	if err != nil {
		diag("payload", err)
		return ExitConfineFailed
	}
	// Nothing but the report descriptor stays: not the spec, not the
	// helper binary. (Only these: the runtime's own descriptors follow.)
	unix.Close(5)
	unix.Close(3)
	return fn(spec.Data, os.NewFile(4, "report"))
}
