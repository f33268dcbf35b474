package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Jailer starts programs in jails. It is safe for concurrent use.
type Jailer struct {
	self     *os.File // the helper binary, exec'd as /proc/self/fd/3
	uid, gid int      // the jail's user: sandbox.uid when root, else ours
	root     bool
	mem      *memCgroups // nil: memory is bounded per process only
	cpu      *cpuCgroups // nil: tenants share the CPU as processes do
	planner  *execPlanner
	// lifeline: the gateway holds the write end and never writes; every
	// jail's stage 1 and init watch the read end, so that a jail ends
	// when its gateway does, however it ends.
	lifeR, lifeW *os.File
	owner        string // this gateway process, for the start-up sweep
	status       JailStatus
	bg           *cleanups // cgroup removals after a jail ends; Close waits for them
}

// NewJailer prepares jails and proves they work by running /bin/true in
// one. On error the returned Jailer is nil and the JailStatus says why:
// the caller then does not offer command tools (fail closed).
func NewJailer(o JailerOptions) (*Jailer, JailStatus, error) {
	st := JailStatus{Mode: ModeJail}
	fail := func(format string, a ...any) (*Jailer, JailStatus, error) {
		st.Reason = fmt.Sprintf(format, a...)
		st.Mechanisms = nil
		return nil, st, errors.New("sandbox: " + st.Reason)
	}
	lp := Probe()
	if lp.Mechanism != MechanismLandlock {
		return fail("no Landlock (needed to restrict what a jail executes): %s", lp.Reason)
	}
	if err := seccompAvailable(); err != nil {
		return fail("%v", err)
	}
	self := o.Self
	if self == "" {
		exe, err := os.Executable()
		if err != nil {
			return fail("cannot locate the helper binary")
		}
		self = exe
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		return fail("no true(1) to test with")
	}
	planner, err := newExecPlanner(truePath, o.LibraryDirs)
	if err != nil {
		return fail("cannot find the system libraries: %v", err)
	}
	if err := planner.setHelper(self); err != nil {
		return fail("cannot read the helper binary: %v", errnoText(err))
	}
	f, err := os.Open(self)
	if err != nil {
		return fail("cannot open the helper binary: %v", errnoText(err))
	}
	j := &Jailer{self: f, root: os.Geteuid() == 0, planner: planner}
	if j.bg, err = newCleanups(); err != nil {
		f.Close()
		return fail("cannot create a pipe: %v", errnoText(err))
	}
	j.uid, j.gid = os.Getuid(), os.Getgid()
	if j.root {
		j.uid, j.gid = o.UID, o.GID
		if j.uid <= 0 {
			j.uid = DefaultUID
		}
		if j.gid <= 0 {
			j.gid = DefaultGID
		}
	}
	if j.lifeR, j.lifeW, err = os.Pipe(); err != nil {
		j.Close()
		return fail("cannot create the jails' lifeline: %v", errnoText(err))
	}
	if j.owner, err = processID(os.Getpid()); err != nil {
		j.Close()
		return fail("cannot read this process's start time: %v", err)
	}
	st.Swept = sweep(j.owner)
	st.UID, st.GID = j.uid, j.gid
	st.Mechanisms = []string{MechanismNamespaces, MechanismLandlock, MechanismSeccomp, MechanismLimits, MechanismNoExec}
	st.Memory = MemoryPerProcess
	if !o.NoCgroup {
		var why string
		if j.mem, why = findMemCgroups(j.owner); j.mem != nil {
			st.Mechanisms = append(st.Mechanisms, MechanismCgroupMemory)
			st.Memory = MemoryPerJail
		} else {
			st.MemoryReason = why
		}
	}
	st.CPU = "process"
	if !o.NoCgroup {
		var why string
		if j.cpu, why = findCPUCgroups(); j.cpu != nil {
			st.Mechanisms = append(st.Mechanisms, MechanismCgroupCPU)
			st.CPU = "weight"
		} else {
			st.CPUReason = why
		}
	}
	if err := j.probe(o.Env); err != nil {
		j.Close()
		return fail("a test program could not run in a jail: %v", err)
	}
	st.Ready = true
	j.status = st
	return j, st, nil
}

// Status returns what NewJailer found.
func (j *Jailer) Status() JailStatus { return j.status }

// UID returns the host user jailed programs run as (the owner their
// workspace must have).
func (j *Jailer) UID() (uid, gid int) { return j.uid, j.gid }

// Close releases the helper binary and the lifeline: every jail still
// running ends.
func (j *Jailer) Close() error {
	var errs []error
	if j.bg != nil {
		j.bg.stop()
	}
	for _, f := range []*os.File{j.self, j.lifeW, j.lifeR} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

// probe runs `true` in a jail with a scratch workspace.
func (j *Jailer) probe(env []string) error {
	truePath, err := exec.LookPath("true")
	if err != nil {
		return errors.New("no true(1) to test with")
	}
	ws, err := os.MkdirTemp("", "toolgate-jail-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	if j.root {
		if err := os.Chown(ws, j.uid, j.gid); err != nil {
			return err
		}
	}
	out, err := os.CreateTemp("", "toolgate-jail-probe-out-")
	if err != nil {
		return err
	}
	os.Remove(out.Name())
	defer out.Close()
	run, err := j.Start(Job{
		Jail:   Jail{Workspace: ws, MountAt: DefaultMountAt, Programs: []string{truePath}},
		Run:    Run{Program: truePath, Args: []string{"true"}, Env: env},
		Stdout: out,
	})
	if err != nil {
		return err
	}
	ex := run.Wait()
	if ex.Code != 0 {
		msg := ex.Diagnostics
		if len(msg) > 300 {
			msg = msg[:300]
		}
		return fmt.Errorf("exit status %d: %s", ex.Code, strings.TrimSpace(msg))
	}
	return nil
}

// Running is a started jail (or, in the Landlock-only mode, a confined
// process group).
type Running struct {
	cmd   *exec.Cmd
	group bool // Landlock-only: signal the process group
	done  chan struct{}
	exit  Exit
}

// maxDiagnostics bounds what a jail's diagnostic pipe is read for.
const maxDiagnostics = 64 << 10

// drainAfterExit bounds how long the diagnostic pipe is read after stage 1
// ended: something the kernel has not reaped yet may still hold it.
const drainAfterExit = 2 * time.Second

// Start builds a jail for job and starts its run; it returns once the
// helper is started (the jail is built, and fails, on its own time: see
// Exit.Diagnostics). The caller owns job's files; Start keeps no copy of
// them once it returns.
func (j *Jailer) Start(job Job) (*Running, error) {
	cmd, release, diagR, err := j.command(job, "")
	if err != nil {
		return nil, err
	}
	err = cmd.Start()
	cg := release()
	if err != nil {
		diagR.Close()
		if cg != nil {
			_ = cg.remove()
		}
		return nil, fmt.Errorf("sandbox: starting the helper: %v", errnoText(err))
	}
	r := &Running{cmd: cmd, done: make(chan struct{})}
	go r.collect(diagR, cg, j.bg)
	return r, nil
}

// collect reads the diagnostic pipe, waits for stage 1 and builds Exit.
func (r *Running) collect(diagR *os.File, cg *jailCgroup, bg *cleanups) {
	defer close(r.done)
	var buf bytes.Buffer
	read := make(chan struct{})
	go func() {
		defer close(read)
		_, _ = io.Copy(&limitedBuffer{&buf, maxDiagnostics}, diagR)
	}()
	err := r.cmd.Wait()
	select {
	case <-read:
	case <-time.After(drainAfterExit):
		diagR.Close()
		<-read
	}
	diagR.Close()
	if cg != nil {
		cg.removeWhenEmpty(bg)
	}
	r.exit = parseExit(err, buf.Bytes())
}

// Wait waits for the jail to end.
func (r *Running) Wait() Exit {
	<-r.done
	return r.exit
}

// Done is closed when the jail has ended.
func (r *Running) Done() <-chan struct{} { return r.done }

// Stop asks every process of the jail to end (SIGTERM from the jail's
// init); the run ends when they have, or when Kill is called.
func (r *Running) Stop() { r.signal(syscall.SIGTERM) }

// Kill ends the jail now: stage 1 dies, the init with it, and the kernel
// kills everything in the jail's PID namespace.
func (r *Running) Kill() { r.signal(syscall.SIGKILL) }

func (r *Running) signal(sig syscall.Signal) {
	if r.group {
		_ = syscall.Kill(-r.cmd.Process.Pid, sig)
		return
	}
	_ = r.cmd.Process.Signal(sig)
}

// limitedBuffer keeps the first max bytes written and discards the rest.
type limitedBuffer struct {
	b   *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// parseExit turns stage 1's end and the diagnostic lines into an Exit.
// Lines are JSON objects: the init's {"status","oom"}, the payload's
// report (anything else with no "stage"), a stage's {"stage","error"};
// any other text (a crash) is a diagnostic.
func parseExit(err error, lines []byte) Exit {
	ex := Exit{Code: 0}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		ex.Code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			ex.Code = 128 + int(ws.Signal())
		}
	default:
		ex.Code = ExitConfineFailed
	}
	var diags []string
	for _, line := range bytes.Split(lines, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var probe map[string]json.RawMessage
		if line[0] != '{' || json.Unmarshal(line, &probe) != nil {
			diags = append(diags, string(line))
			continue
		}
		switch {
		case probe["stage"] != nil:
			var d struct{ Stage, Error string }
			_ = json.Unmarshal(line, &d)
			diags = append(diags, d.Stage+": "+d.Error)
			ex.Failed = true
		case probe["status"] != nil:
			var ir initReport
			if json.Unmarshal(line, &ir) == nil {
				ex.OOM = ex.OOM || ir.OOM
			}
		default:
			if ex.Report == nil {
				ex.Report = append([]byte(nil), line...)
			}
		}
	}
	ex.Diagnostics = strings.Join(diags, "\n")
	return ex
}

// command builds stage 1's command for job. release must be called once
// Start returned: it closes the gateway's copies of the helper's files and
// returns the jail's cgroup, if any.
func (j *Jailer) command(job Job, stderrMode string) (*exec.Cmd, func() *jailCgroup, *os.File, error) {
	if job.Jail.Network && Probe().ABI < 6 {
		// Jails with the host's network share its abstract unix sockets
		// unless Landlock scopes them (ABI 6, Linux 6.12): fail closed.
		return nil, nil, nil, ErrNetworkUnscoped
	}
	uid, gid := j.jailUID()
	js, err := j.planner.plan(job.Jail, uid, gid)
	if err != nil {
		return nil, nil, nil, err
	}
	spec := jobSpec{
		Jail: js, Program: job.Run.Program, Args: job.Run.Args, Env: job.Run.Env, Dir: job.Run.Dir,
		Payload: job.Run.Payload, Data: job.Run.Data, Stderr: stderrMode,
	}
	if spec.Stderr == "" {
		spec.Stderr = stderrOwn
		if job.Stderr == nil {
			spec.Stderr = stderrStdout
		}
	}
	if spec.Payload == "" && (spec.Program == "" || !filepath.IsAbs(spec.Program) || len(spec.Args) == 0) {
		return nil, nil, nil, errors.New("sandbox: a run needs an absolute program and its argv")
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return nil, nil, nil, err
	}
	specFile, err := sealedFile("toolgate-job", data)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("sandbox: job spec: %v", err)
	}
	var opened []*os.File
	closeAll := func() {
		for _, f := range opened {
			f.Close()
		}
	}
	opened = append(opened, specFile)
	stdin := job.Stdin
	if stdin == nil {
		if stdin, err = os.Open(os.DevNull); err != nil {
			closeAll()
			return nil, nil, nil, err
		}
		opened = append(opened, stdin)
	}
	var diagR, diagW *os.File
	if stderrMode != stderrDiag {
		if diagR, diagW, err = os.Pipe(); err != nil {
			closeAll()
			return nil, nil, nil, err
		}
		opened = append(opened, diagW)
	}
	stderr := job.Stderr
	if stderr == nil {
		stderr = job.Stdout
	}
	if stderrMode == stderrDiag {
		// The program's stderr is the helper's own fd 2 (cmd.Stderr).
		if stderr, err = os.Open(os.DevNull); err != nil {
			closeAll()
			return nil, nil, nil, err
		}
		opened = append(opened, stderr)
	}
	args := []string{"toolgate-jail", SubCommand, "--stage1", "--owner=" + j.owner}
	extra := []*os.File{j.self, specFile, j.lifeR, stderr}
	if j.root {
		// A clone of the workspace's mount tree: the jail's user may have
		// no access to the folders above the workspace.
		fd, err := unix.OpenTree(unix.AT_FDCWD, js.Workspace, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			closeAll()
			if diagR != nil {
				diagR.Close()
			}
			return nil, nil, nil, fmt.Errorf("sandbox: cloning the workspace mount: %v", errnoText(err))
		}
		tree := os.NewFile(uintptr(fd), "workspace")
		opened = append(opened, tree)
		extra = append(extra, tree)
		args = append(args, "--ws-tree="+strconv.Itoa(3+len(extra)-1))
	}
	var cg *jailCgroup
	if j.mem != nil {
		if cg, err = j.mem.create(js.Limits.MemoryBytes); err != nil {
			closeAll()
			if diagR != nil {
				diagR.Close()
			}
			return nil, nil, nil, err
		}
		extra = append(extra, cg.procs, cg.oom)
		args = append(args, "--mem-procs="+strconv.Itoa(3+len(extra)-2), "--oom="+strconv.Itoa(3+len(extra)-1))
	}
	if j.cpu != nil && job.Jail.CPUGroup != "" {
		weight := job.Jail.CPUWeight
		if weight == 0 {
			weight = DefaultCPUWeight
		}
		f, err := j.cpu.procs(job.Jail.CPUGroup, weight)
		if err != nil {
			closeAll()
			if diagR != nil {
				diagR.Close()
			}
			if cg != nil {
				cg.close()
				_ = cg.remove()
			}
			return nil, nil, nil, err
		}
		opened = append(opened, f)
		extra = append(extra, f)
		args = append(args, "--cpu-procs="+strconv.Itoa(3+len(extra)-1))
	}
	cmd := exec.Command("/proc/self/fd/3")
	cmd.Args = args
	cmd.Env = []string{}
	cmd.Stdin, cmd.Stdout = stdin, job.Stdout
	if diagW != nil {
		cmd.Stderr = diagW
	}
	cmd.ExtraFiles = extra
	release := func() *jailCgroup {
		closeAll()
		if cg != nil {
			cg.close()
		}
		return cg
	}
	return cmd, release, diagR, nil
}

func (j *Jailer) jailUID() (int, int) {
	if j.root {
		return j.uid, j.gid
	}
	return -1, -1
}

// sealedFile returns a read-only, sealed memory file holding data.
func sealedFile(name string, data []byte) (*os.File, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_NOEXEC_SEAL)
	if errors.Is(err, unix.EINVAL) { // a kernel before MFD_NOEXEC_SEAL (6.3)
		fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), name)
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Wrap rewrites cmd, before Start, to run its program in jail jl: cmd.Path
// becomes the helper and cmd.Args the helper's stage 1; the program, its
// argv, environment and folder travel in the job spec. cmd's standard
// streams are the program's (its stderr also gets the helper's own
// messages), and signals to cmd's process reach the jail: SIGTERM asks
// every process of it to end, SIGKILL ends it. cmd.Dir must be inside
// jl.Workspace. The caller must call release once Start has returned.
func (j *Jailer) Wrap(cmd *exec.Cmd, jl Jail) (release func(), err error) {
	if cmd == nil || cmd.Process != nil {
		return nil, errors.New("sandbox: command nil or already started")
	}
	if cmd.Err != nil {
		return nil, cmd.Err
	}
	if len(cmd.ExtraFiles) > 0 {
		return nil, errors.New("sandbox: a jailed command cannot inherit extra files")
	}
	mountAt := jl.MountAt
	if mountAt == "" {
		mountAt = filepath.Clean(jl.Workspace)
	}
	dir := mountAt
	if cmd.Dir != "" {
		rel, ok := hostRel(filepath.Clean(jl.Workspace), cmd.Dir)
		if !ok {
			return nil, errors.New("sandbox: the command's folder is outside its workspace")
		}
		dir = filepath.Join(mountAt, rel)
	}
	prog := cmd.Path
	if rel, ok := hostRel(filepath.Clean(jl.Workspace), prog); ok {
		prog = filepath.Join(mountAt, rel)
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	// The streams are cmd's own, wired by exec at Start: the program's
	// stderr is the helper's fd 2.
	job := Job{Jail: jl, Run: Run{Program: prog, Args: cmd.Args, Env: env, Dir: dir}}
	c, rel, _, err := j.command(job, stderrDiag)
	if err != nil {
		return nil, err
	}
	cmd.Path, cmd.Args, cmd.Env, cmd.Dir, cmd.ExtraFiles = c.Path, c.Args, c.Env, "", c.ExtraFiles
	if cmd.Stdin == nil {
		cmd.Stdin = c.Stdin
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			if cg := rel(); cg != nil {
				if cmd.Process != nil {
					cg.removeAfter(j.bg, cmd.Process.Pid)
				} else {
					_ = cg.remove()
				}
			}
		})
	}, nil
}

// OwnWorkspace gives the jail's user the workspace tree at dir: files a
// jail creates there are the jail user's on the host (never root's), so
// the tree must be that user's for a jail to write in it. A root gateway
// changes the owner of every entry that has another (without following a
// symlink, and never leaving dir); a gateway that is not root runs jails
// as itself and changes nothing.
func (j *Jailer) OwnWorkspace(dir string) error {
	if !j.root {
		return nil
	}
	return ChownTree(dir, j.uid, j.gid)
}

// ChownTree sets the owner of dir and everything below it to uid:gid,
// through an os.Root so that no symlink leads outside, and without
// following a symlink itself.
func ChownTree(dir string, uid, gid int) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	return fs.WalkDir(root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return nil // gone meanwhile
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == uid && int(st.Gid) == gid {
			return nil
		}
		if err := root.Lchown(p, uid, gid); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
}
