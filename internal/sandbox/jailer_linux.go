package sandbox

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Jailer starts programs in jails. It is safe for concurrent use.
type Jailer struct {
	self     *os.File // the helper binary, exec'd as /proc/self/fd/3
	idmap    *os.File // root only: user namespace mapping 0 to uid
	uid, gid int
	root     bool
	mem      *memCgroups // nil: memory is bounded per process only
	status   JailStatus
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
	f, err := os.Open(self)
	if err != nil {
		return fail("cannot open the helper binary: %v", errnoText(err))
	}
	j := &Jailer{self: f, root: os.Geteuid() == 0}
	j.uid, j.gid = os.Getuid(), os.Getgid()
	if j.root {
		j.uid, j.gid = o.UID, o.GID
		if j.uid <= 0 {
			j.uid = 65534
		}
		if j.gid <= 0 {
			j.gid = 65534
		}
		if j.idmap, err = holdUserNS(f, j.uid, j.gid, o.Env); err != nil {
			f.Close()
			return fail("cannot create the workspace id mapping: %v", err)
		}
	}
	st.UID, st.GID = j.uid, j.gid
	st.Mechanisms = []string{MechanismNamespaces, MechanismLandlock, MechanismSeccomp, MechanismLimits}
	if j.root {
		st.Mechanisms = append(st.Mechanisms, MechanismIDMap)
	}
	st.Memory = MemoryPerProcess
	if !o.NoCgroup {
		var why string
		if j.mem, why = findMemCgroups(); j.mem != nil {
			st.Mechanisms = append(st.Mechanisms, MechanismCgroupMemory)
			st.Memory = MemoryPerJail
		} else {
			st.MemoryReason = why
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

// Close releases the helper binary and the id mapping.
func (j *Jailer) Close() error {
	var errs []error
	if j.self != nil {
		errs = append(errs, j.self.Close())
	}
	if j.idmap != nil {
		errs = append(errs, j.idmap.Close())
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
	cmd := exec.Command(truePath)
	cmd.Dir = ws
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	release, err := j.Wrap(cmd, Jail{Workspace: ws, Programs: []string{truePath}})
	if err != nil {
		return err
	}
	err = cmd.Start()
	release()
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		msg := bytes.TrimSpace(stderr.Bytes())
		if len(msg) > 200 {
			msg = msg[:200]
		}
		return fmt.Errorf("%v %s", errnoText(err), msg)
	}
	return nil
}

// holdUserNS creates a user namespace that maps id 0 to uid/gid and returns
// a file descriptor of it: the id mapping of the workspace mounts, so that
// files the gateway (root) owns appear owned by the jail's user inside,
// and files the jail creates are owned by the gateway's root on disk.
func holdUserNS(self *os.File, uid, gid int, env []string) (*os.File, error) {
	cmd := exec.Command("/proc/self/fd/3", SubCommand, "--hold")
	cmd.ExtraFiles = []*os.File{self}
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}},
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ns, err := os.Open("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/user")
	stdin.Close()
	werr := cmd.Wait()
	if err != nil {
		return nil, err
	}
	if werr != nil {
		ns.Close()
		return nil, werr
	}
	return ns, nil
}

// Wrap rewrites cmd, before Start, to run its program in jail jl: cmd.Path
// becomes the helper, the namespaces are asked of the kernel through
// cmd.SysProcAttr (whose Setpgid and Setsid are kept), and the helper's
// arguments encode jl. cmd.Dir must be inside jl.Workspace. The caller
// must call release once Start has returned (it closes the parent's copy
// of the workspace mount).
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
	args, err := jailArgs(jl)
	if err != nil {
		return nil, err
	}
	extra := []*os.File{j.self}
	var tree *os.File
	var cg *jailCgroup
	release = func() {
		if tree != nil {
			tree.Close()
		}
		if cg != nil {
			cg.close()
			if cmd.Process != nil {
				go cg.removeAfter(cmd.Process.Pid)
			} else {
				_ = cg.remove()
			}
		}
	}
	if j.root {
		if tree, err = j.idmappedTree(jl.Workspace); err != nil {
			return nil, err
		}
		extra = append(extra, tree)
		args = append(args, "--ws-fd=4")
	}
	if j.mem != nil {
		if cg, err = j.mem.create(jl.Limits.WithDefaults().MemoryBytes); err != nil {
			release()
			return nil, err
		}
		extra = append(extra, cg.procs, cg.oom)
		// ExtraFiles[i] is descriptor 3+i in the helper.
		args = append(args, "--cg-fd="+strconv.Itoa(3+len(extra)-2), "--cg-oom-fd="+strconv.Itoa(3+len(extra)-1))
	}
	rest := []string(nil)
	if len(cmd.Args) > 0 {
		if cmd.Args[0] != cmd.Path {
			args = append(args, "--argv0="+cmd.Args[0])
		}
		rest = cmd.Args[1:]
	}
	args = append(append(args, "--", cmd.Path), rest...)
	cmd.Path = "/proc/self/fd/3"
	cmd.Args = append([]string{"toolgate-jail", SubCommand}, args...)
	cmd.ExtraFiles = extra
	if j.root {
		args := cmd.Args[:2:2]
		cmd.Args = append(append(args, "--uid="+strconv.Itoa(j.uid), "--gid="+strconv.Itoa(j.gid)), cmd.Args[2:]...)
	}
	// The helper creates the jail's namespaces itself (runStage1): the
	// gateway starts it like any program, with CLONE_VM|CLONE_VFORK,
	// whatever cmd.SysProcAttr already says (Setpgid, Setsid) kept.
	return release, nil
}

// idmappedTree clones the workspace mount at ws as a detached tree whose
// ids are mapped through the held user namespace.
func (j *Jailer) idmappedTree(ws string) (*os.File, error) {
	fd, err := unix.OpenTree(unix.AT_FDCWD, ws, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("sandbox: cloning the workspace mount: %v", errnoText(err))
	}
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(j.idmap.Fd())}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("sandbox: id-mapping the workspace mount: %v", errnoText(err))
	}
	return os.NewFile(uintptr(fd), "workspace"), nil
}

// hold blocks until stdin closes: the process whose user namespace
// holdUserNS keeps.
func hold() int {
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}
