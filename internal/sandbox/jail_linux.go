package sandbox

import (
	"bufio"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/gobwas/glob"
	"golang.org/x/sys/unix"

	"github.com/toolgate/toolgate/internal/wspath"
)

// The helper's side of the jail. It runs as PID 1 of fresh PID, mount,
// IPC, UTS, (network) and user namespaces that [Jailer.Wrap] asked the
// kernel for, as an unprivileged user that holds CAP_SYS_ADMIN only inside
// its own user namespace (an ambient capability), and:
//
//  1. builds a new root on a tmpfs: the system folders read-only, a minimal
//     /etc, a few devices, its own /proc and /tmp, and the workspace;
//  2. makes the workspace read-only except the write paths, hides the
//     hidden paths under empty read-only mounts and pins their ancestors
//     (a mount point cannot be renamed, so a hidden file cannot be moved
//     out from under its glob);
//  3. pivots into the new root and detaches the old one;
//  4. sets the resource limits, drops every capability, sets no_new_privs,
//     restricts execution with Landlock to the approved programs, their
//     loaders and the exec paths, and adds the no-network seccomp filter;
//  5. starts the program and stays as its init: it reaps orphans and exits
//     with the program's status when the program ends, at which point the
//     kernel kills everything left in the PID namespace.

// jailCaps are the capabilities the helper holds (in its own user
// namespace only) to build the jail; it drops them before the program
// starts.
var jailCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP, unix.CAP_SYS_CHROOT, unix.CAP_SETUID, unix.CAP_SETGID}

// systemDirs are mounted read-only at the same place; the ones missing on
// the host are skipped, symlinks (merged /usr) are recreated as symlinks.
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}

// etcEntries is the minimal /etc: names, users, the loader's cache,
// certificates, time zone, alternatives. Nothing else of the host's /etc
// exists inside.
var etcEntries = []string{
	"passwd", "group", "hosts", "hostname", "nsswitch.conf", "localtime", "timezone",
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "ssl", "ca-certificates",
	"ca-certificates.conf", "mime.types", "os-release", "debian_version", "protocols",
	"services", "inputrc", "magic", "gitconfig", "resolv.conf",
}

// jailDevices are bind-mounted into the jail's /dev.
var jailDevices = []string{"null", "zero", "full", "random", "urandom", "tty"}

// maxWalkEntries bounds the workspace walk that finds hidden and writable
// paths; a bigger workspace fails closed.
const maxWalkEntries = 500_000

// jailBase is where the helper mounts its scratch tmpfs; the host's copy of
// it stays reachable under /oldroot until the old root is detached.
const jailBase = "/tmp"

// runStage1 is the helper as the gateway starts it: a small process in
// the gateway's namespaces. It starts itself again as stage 2 in the
// jail's new namespaces, moves stage 2 into the jail's memory cgroup
// before stage 2 may start the program, and relays its exit status.
// Creating the namespaces here rather than from the gateway matters for
// speed: a clone with CLONE_NEWUSER cannot share the parent's memory, so
// from the gateway it copies the page tables of a large process (several
// milliseconds per call); from this small process it costs little.
func runStage1(cfg helperConfig, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "sandbox-exec: cannot build jail: %v\n", err)
		return ExitConfineFailed
	}
	// The thread that starts stage 2 is its parent for Pdeathsig: keep it.
	runtime.LockOSThread()
	signal.Notify(make(chan os.Signal, 8), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE)
	// Descriptors 3.. keep their numbers in stage 2 (the helper binary,
	// the workspace tree, the cgroup's oom_control). At the number of
	// cgroup.procs stage 2 gets instead the read end of a pipe on which
	// stage 1 says that stage 2 is in the jail's cgroup: stage 1 moves it
	// there while it builds the jail (a cgroup move waits for an RCU grace
	// period, milliseconds, so the two overlap), and stage 2 starts the
	// program only after that.
	last := max(3, cfg.wsFD, cfg.cgFD, cfg.cgOOMFD)
	extra := make([]*os.File, last-2)
	for fd := 3; fd <= last; fd++ {
		// Never an *os.File for cgroup.procs: its finalizer would close
		// the descriptor moveToCgroup writes to once a GC runs.
		if fd != cfg.cgFD {
			extra[fd-3] = os.NewFile(uintptr(fd), "inherited")
		}
	}
	var joined *os.File
	if cfg.cgFD >= 0 {
		r, w, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		extra[cfg.cgFD-3], joined = r, w
		defer r.Close()
	}
	cmd := exec.Command("/proc/self/fd/3")
	cmd.Args = append([]string{"toolgate-jail", SubCommand, "--stage2"}, cfg.raw...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.ExtraFiles = extra
	uid, gid := os.Getuid(), os.Getgid()
	spa := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if cfg.uid >= 0 {
		// The gateway runs as root: the jail's user is mapped to itself;
		// stage 2 starts as root (no id in the new namespace, so no
		// privilege there but its ambient capabilities), builds the jail,
		// then becomes that user. Setting the ids here instead would make
		// stage 2 non-dumpable and /proc/self/fd/3 unreachable.
		uid, gid = cfg.uid, cfg.gid
		spa.GidMappingsEnableSetgroups = true
	}
	spa.Cloneflags = syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
		syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWCGROUP
	if !cfg.network {
		spa.Cloneflags |= syscall.CLONE_NEWNET
	}
	spa.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	spa.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	spa.AmbientCaps = jailCaps
	cmd.SysProcAttr = spa
	if err := cmd.Start(); err != nil {
		return fail(errors.New(errnoText(err)))
	}
	if joined != nil {
		err := moveToCgroup(cfg.cgFD, cmd.Process.Pid)
		if err == nil {
			_, err = joined.Write([]byte{'1'})
		}
		joined.Close()
		if err != nil {
			// Stage 2 reads EOF and never starts the program.
			fmt.Fprintf(stderr, "sandbox-exec: cannot build jail: %v\n", err)
		}
	}
	err := cmd.Wait()
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

// runJail builds the jail and runs the program in it. It returns only the
// exit status to use (the program's, or 126/127 when it never ran).
func runJail(cfg helperConfig, argv, env []string, stderr io.Writer) int {
	fail := func(code int, err error) int {
		fmt.Fprintf(stderr, "sandbox-exec: %v\n", err)
		return code
	}
	// Namespaces, Landlock, no_new_privs and seccomp are set on this
	// thread and inherited by the program it forks.
	runtime.LockOSThread()
	if !cfg.stage2 {
		return runStage1(cfg, stderr)
	}
	// A signal the gateway sends the command's process group must not end
	// the jail's init before the program: catch (not ignore, which the
	// program would inherit) the usual ones.
	signal.Notify(make(chan os.Signal, 8), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE)

	cwd, err := os.Getwd()
	if err != nil {
		return fail(ExitConfineFailed, errors.New("cannot build jail: no working folder"))
	}
	if err := buildJail(cfg, cwd); err != nil {
		return fail(ExitConfineFailed, fmt.Errorf("cannot build jail: %v", err))
	}
	prog := cfg.path
	if _, err := os.Stat(prog); err != nil {
		return fail(ExitNotFound, errors.New("command not found"))
	}
	if cfg.cgFD >= 0 {
		if err := awaitCgroup(cfg.cgFD); err != nil {
			return fail(ExitConfineFailed, fmt.Errorf("cannot build jail: %v", err))
		}
	}
	// Limits last: they bind this process too, and it only waits from here.
	if err := setLimits(cfg.limits, cfg.cgOOMFD >= 0); err != nil {
		return fail(ExitConfineFailed, fmt.Errorf("cannot build jail: limits: %v", err))
	}
	// No descriptor the gateway passed (the helper binary, the cgroup)
	// reaches the program.
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fail(ExitConfineFailed, fmt.Errorf("cannot build jail: %v", errnoText(err)))
	}
	pid, err := syscall.ForkExec(prog, argv, &syscall.ProcAttr{Dir: cwd, Env: env, Files: []uintptr{0, 1, 2}})
	if err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return fail(ExitNotFound, errors.New("command not found"))
		}
		if errors.Is(err, syscall.EACCES) {
			return fail(ExitConfineFailed, errors.New("cannot run command: not an approved program"))
		}
		return fail(ExitConfineFailed, fmt.Errorf("cannot run command: %v", errnoText(err)))
	}
	return reapUntil(pid, cfg.cgOOMFD, stderr)
}

// reapUntil is the jail's init loop: it reaps every child (orphans of the
// program included) until the program itself ends, and returns its exit
// status in the shell's convention. cgOOM, when not -1, is the jail's
// memory cgroup: a program that ends badly after the OOM killer ended one
// of the jail's processes gets the memory note.
func reapUntil(pid, cgOOM int, stderr io.Writer) int {
	memNote := func(failed bool) {
		if failed && cgOOM >= 0 && oomKilled(cgOOM) {
			io.WriteString(stderr, "\n[killed: memory limit]\n")
		}
	}
	for {
		var ws unix.WaitStatus
		wpid, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return ExitConfineFailed
		}
		if wpid != pid {
			continue
		}
		switch {
		case ws.Exited():
			memNote(ws.ExitStatus() != 0)
			return ws.ExitStatus()
		case ws.Signaled():
			switch ws.Signal() {
			case unix.SIGKILL:
				memNote(true)
			case unix.SIGXCPU:
				io.WriteString(stderr, "\n[killed: CPU time limit]\n")
			case unix.SIGXFSZ:
				io.WriteString(stderr, "\n[killed: file size limit]\n")
			}
			return 128 + int(ws.Signal())
		}
	}
}

// buildJail does steps 1-4 on the calling thread.
func buildJail(cfg helperConfig, cwd string) error {
	if cfg.uid >= 0 {
		// The gateway's root is no id in this user namespace: become the
		// jail's user first (files cannot be created by an unmapped id).
		// The capabilities stay, as the old uid was not this namespace's
		// root. syscall's set*id apply to every thread of the process.
		if err := errors.Join(syscall.Setgroups(nil), syscall.Setresgid(cfg.gid, cfg.gid, cfg.gid), syscall.Setresuid(cfg.uid, cfg.uid, cfg.uid)); err != nil {
			return fmt.Errorf("becoming the jail's user: %v", errnoText(err))
		}
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %v", errnoText(err))
	}
	if err := unix.Mount("tmpfs", jailBase, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return fmt.Errorf("scratch tmpfs: %v", errnoText(err))
	}
	for _, d := range []string{"newroot", "oldroot"} {
		if err := os.Mkdir(jailBase+"/"+d, 0o755); err != nil {
			return err
		}
	}
	if err := unix.PivotRoot(jailBase, jailBase+"/oldroot"); err != nil {
		return fmt.Errorf("pivot_root: %v", errnoText(err))
	}
	if err := unix.Chdir("/"); err != nil {
		return err
	}
	// Placeholders mounted over hidden paths: empty, mode 0, read-only.
	if err := os.Mkdir("/hidden-dir", 0); err != nil {
		return err
	}
	if err := os.WriteFile("/hidden-file", nil, 0); err != nil {
		return err
	}
	if err := os.Chmod("/hidden-dir", 0); err != nil {
		return err
	}
	if err := os.Chmod("/hidden-file", 0); err != nil {
		return err
	}
	const nr = "/newroot"
	if err := unix.Mount("tmpfs", nr, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return fmt.Errorf("root tmpfs: %v", errnoText(err))
	}
	covered := []string{}
	for _, d := range systemDirs {
		ok, err := bindHost(d, true)
		if err != nil {
			return fmt.Errorf("system folder %s: %v", d, err)
		}
		if ok {
			covered = append(covered, d)
		}
	}
	if err := buildEtc(); err != nil {
		return fmt.Errorf("/etc: %v", err)
	}
	if err := buildDev(); err != nil {
		return fmt.Errorf("/dev: %v", err)
	}
	if err := os.Mkdir(nr+"/proc", 0o555); err != nil {
		return err
	}
	if err := unix.Mount("proc", nr+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("/proc: %v", errnoText(err))
	}
	if err := os.Mkdir(nr+"/tmp", 0o1777); err != nil {
		return err
	}
	tmpSize := strconv.FormatInt(min(cfg.limits.FileSizeBytes, cfg.limits.MemoryBytes), 10)
	if err := unix.Mount("tmpfs", nr+"/tmp", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,size="+tmpSize); err != nil {
		return fmt.Errorf("/tmp: %v", errnoText(err))
	}
	if err := buildWorkspace(cfg); err != nil {
		return fmt.Errorf("workspace: %v", err)
	}
	covered = append(covered, cfg.ws, "/tmp")
	exec, err := bindExecPaths(cfg.exec, covered)
	if err != nil {
		return fmt.Errorf("exec paths: %v", err)
	}
	// The root itself is read-only: a program writes only to /tmp and the
	// workspace's write paths.
	if err := setattr(nr, unix.MOUNT_ATTR_RDONLY, 0, false); err != nil {
		return fmt.Errorf("read-only root: %v", err)
	}
	// pivot_root(".", ".") stacks the old root under the new one; the
	// detach then removes every host mount from this namespace.
	if err := unix.Chdir(nr); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %v", errnoText(err))
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detaching the host: %v", errnoText(err))
	}
	if err := unix.Chdir(cwd); err != nil {
		return fmt.Errorf("working folder: %v", errnoText(err))
	}
	_ = unix.Sethostname([]byte("toolgate"))
	if err := dropCaps(); err != nil {
		return fmt.Errorf("dropping capabilities: %v", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %v", errnoText(err))
	}
	if err := restrictExec(exec, cfg.network); err != nil {
		return fmt.Errorf("landlock: %v", err)
	}
	if err := installJailFilter(cfg.network); err != nil {
		return fmt.Errorf("seccomp: %v", errnoText(err))
	}
	return nil
}

// bindHost mounts the host's path p (a folder or file) read-only at the same
// place in the new root, or recreates it when it is a symlink. It reports
// false when the host has no such path.
func bindHost(p string, recursive bool) (bool, error) {
	src, dst := "/oldroot"+p, "/newroot"+p
	fi, err := os.Lstat(src)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, errors.New(errnoText(err))
	}
	if err := os.MkdirAll(path.Dir(dst), 0o755); err != nil {
		return false, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Readlink(src)
		if err != nil {
			return false, err
		}
		return true, os.Symlink(target, dst)
	}
	if fi.IsDir() {
		if err := os.Mkdir(dst, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return false, err
		}
	} else if err := os.WriteFile(dst, nil, 0o644); err != nil {
		return false, err
	}
	flags := uintptr(unix.MS_BIND)
	if recursive {
		flags |= unix.MS_REC
	}
	if err := unix.Mount(src, dst, "", flags, ""); err != nil {
		return false, errors.New(errnoText(err))
	}
	return true, setattr(dst, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, 0, recursive)
}

// setattr sets and clears mount attributes of the mount at p.
func setattr(p string, set, clr uint64, recursive bool) error {
	flags := uint(0)
	if recursive {
		flags = unix.AT_RECURSIVE
	}
	err := unix.MountSetattr(unix.AT_FDCWD, p, flags, &unix.MountAttr{Attr_set: set, Attr_clr: clr})
	if err != nil {
		return errors.New(errnoText(err))
	}
	return nil
}

func buildEtc() error {
	if err := os.Mkdir("/newroot/etc", 0o755); err != nil {
		return err
	}
	for _, e := range etcEntries {
		if _, err := bindHost("/etc/"+e, true); err != nil {
			return fmt.Errorf("%s: %v", e, err)
		}
	}
	return nil
}

func buildDev() error {
	const dev = "/newroot/dev"
	if err := os.Mkdir(dev, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=0755,size=64k"); err != nil {
		return errors.New(errnoText(err))
	}
	for _, d := range jailDevices {
		src := "/oldroot/dev/" + d
		if _, err := os.Stat(src); err != nil {
			continue
		}
		if err := os.WriteFile(dev+"/"+d, nil, 0o666); err != nil {
			return err
		}
		if err := unix.Mount(src, dev+"/"+d, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("%s: %v", d, errnoText(err))
		}
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(target, dev+"/"+name); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dev+"/shm", 0o1777); err != nil {
		return err
	}
	return errors.Join(
		unix.Mount("tmpfs", dev+"/shm", "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=1777,size=64m"),
		setattr(dev, unix.MOUNT_ATTR_RDONLY, 0, false),
	)
}

// buildWorkspace mounts the workspace (the idmapped tree the gateway passed,
// or a bind of the host folder), then applies write paths, hidden paths and
// pins.
func buildWorkspace(cfg helperConfig) error {
	w := "/newroot" + cfg.ws
	if err := os.MkdirAll(w, 0o755); err != nil {
		return err
	}
	if cfg.wsFD >= 0 {
		err := unix.MoveMount(cfg.wsFD, "", unix.AT_FDCWD, w, unix.MOVE_MOUNT_F_EMPTY_PATH)
		unix.Close(cfg.wsFD)
		if err != nil {
			return fmt.Errorf("idmapped workspace: %v", errnoText(err))
		}
	} else if err := unix.Mount("/oldroot"+cfg.ws, w, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return errors.New(errnoText(err))
	}
	if err := setattr(w, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV, 0, true); err != nil {
		return err
	}
	plan, err := planWorkspace(w, cfg.hide, cfg.writable)
	if err != nil {
		return err
	}
	if !cfg.wsWritable {
		if err := setattr(w, unix.MOUNT_ATTR_RDONLY, 0, true); err != nil {
			return err
		}
		for _, rel := range plan.writable {
			p := w + "/" + rel
			if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				return fmt.Errorf("write path: %v", errnoText(err))
			}
			if err := setattr(p, 0, unix.MOUNT_ATTR_RDONLY, true); err != nil {
				return fmt.Errorf("write path: %v", err)
			}
		}
	}
	for _, h := range plan.hidden {
		p := w + "/" + h.rel
		src := "/hidden-file"
		if h.dir {
			src = "/hidden-dir"
		}
		if err := unix.Mount(src, p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("hiding a path: %v", errnoText(err))
		}
		if err := setattr(p, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOEXEC, 0, false); err != nil {
			return fmt.Errorf("hiding a path: %v", err)
		}
	}
	for _, rel := range plan.pins {
		p := w + "/" + rel
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("pinning a folder: %v", errnoText(err))
		}
	}
	return nil
}

type hiddenPath struct {
	rel string
	dir bool
}

type workspacePlan struct {
	writable []string // workspace-relative, parents before children
	hidden   []hiddenPath
	pins     []string // ancestors of hidden paths, shallowest first
}

// planWorkspace finds, in the workspace mounted at w, the paths to hide (every
// match of a hide glob; nothing below a hidden folder is visited) and the
// paths to make writable: the folder of each "dir/**" glob (or the whole
// workspace for "**"), each existing file a literal glob names, and each
// existing file any other glob matches. Folders a narrower glob would
// cover only in part stay read-only: a write path is never widened.
//
// A literal or folder is made writable only when it is the path it names:
// resolved in the workspace by wspath.Resolve (the tools' resolver) to
// itself, so that no symlink or '..' on the way leads elsewhere — policy
// judged the path the glob spells, and the tools resolve symlinks before
// they judge one.
func planWorkspace(w string, hide, writable []string) (workspacePlan, error) {
	var plan workspacePlan
	hideM, err := compileGlobs(hide)
	if err != nil {
		return plan, err
	}
	root, err := os.OpenRoot(w)
	if err != nil {
		return plan, err
	}
	defer root.Close()
	exact := func(p string) (fs.FileInfo, bool) {
		r, err := wspath.Resolve(root, p, wspath.Options{Mode: wspath.MustExist})
		if err != nil || r.Rel != path.Clean(p) {
			return nil, false
		}
		return r.Info, true
	}
	var walkW []*glob.Pattern
	for _, g := range writable {
		prefix, tree, literal := globRoot(g)
		switch {
		case literal:
			if fi, ok := exact(g); ok && fi.Mode().IsRegular() {
				plan.writable = append(plan.writable, path.Clean(g))
			}
		case tree:
			if fi, ok := exact(prefix); ok && fi.IsDir() {
				plan.writable = append(plan.writable, path.Clean(prefix))
			}
		default:
			c, err := glob.Compile(g, '/')
			if err != nil {
				return plan, err
			}
			walkW = append(walkW, c)
		}
	}
	if len(hideM) > 0 || len(walkW) > 0 {
		pins := map[string]bool{}
		// Hard links: a file with more than one name is hidden under all
		// of its names in the workspace when one of them is hidden.
		hiddenInodes := map[fileID]bool{}
		var linked []linkedFile
		n := 0
		hideAncestors := func(rel string) {
			for a := path.Dir(rel); a != "."; a = path.Dir(a) {
				pins[a] = true
			}
		}
		err := filepath.WalkDir(w, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if p == w {
					return err
				}
				return nil // unreadable entries cannot be read inside either
			}
			if n++; n > maxWalkEntries {
				return fmt.Errorf("workspace has more than %d entries", maxWalkEntries)
			}
			if p == w {
				return nil
			}
			rel := p[len(w)+1:]
			if matchAny(hideM, rel) {
				if d.Type()&fs.ModeSymlink == 0 {
					plan.hidden = append(plan.hidden, hiddenPath{rel: rel, dir: d.IsDir()})
					hideAncestors(rel)
				}
				if d.IsDir() {
					// Walk it only for the identities of its linked files.
					if err := collectLinked(p, hiddenInodes, &n); err != nil {
						return err
					}
					return fs.SkipDir
				}
				if id, ok := linkedID(d); ok {
					hiddenInodes[id] = true
				}
				return nil
			}
			if id, ok := linkedID(d); ok {
				linked = append(linked, linkedFile{rel, id})
			}
			if d.Type().IsRegular() && matchAny(walkW, rel) {
				plan.writable = append(plan.writable, rel)
			}
			return nil
		})
		if err != nil {
			return plan, err
		}
		for _, l := range linked {
			if hiddenInodes[l.id] {
				plan.hidden = append(plan.hidden, hiddenPath{rel: l.rel})
				hideAncestors(l.rel)
			}
		}
		for a := range pins {
			plan.pins = append(plan.pins, a)
		}
	}
	plan.writable = dedupeNested(plan.writable)
	sort.Slice(plan.pins, func(i, j int) bool { return depth(plan.pins[i]) < depth(plan.pins[j]) })
	return plan, nil
}

// fileID is a file's identity on its filesystem.
type fileID struct{ dev, ino uint64 }

type linkedFile struct {
	rel string
	id  fileID
}

// linkedID returns the identity of a regular file with more than one link.
func linkedID(d fs.DirEntry) (fileID, bool) {
	if !d.Type().IsRegular() {
		return fileID{}, false
	}
	fi, err := d.Info()
	if err != nil {
		return fileID{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Nlink < 2 {
		return fileID{}, false
	}
	return fileID{uint64(st.Dev), st.Ino}, true
}

// collectLinked adds the identities of the linked regular files below dir.
func collectLinked(dir string, into map[fileID]bool, n *int) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if *n++; *n > maxWalkEntries {
			return fmt.Errorf("workspace has more than %d entries", maxWalkEntries)
		}
		if id, ok := linkedID(d); ok {
			into[id] = true
		}
		return nil
	})
}

func compileGlobs(gs []string) ([]*glob.Pattern, error) {
	out := make([]*glob.Pattern, 0, len(gs))
	for _, g := range gs {
		c, err := glob.Compile(g, '/')
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func matchAny(gs []*glob.Pattern, s string) bool {
	for _, g := range gs {
		if g.Match(s) {
			return true
		}
	}
	return false
}

func depth(rel string) int { return strings.Count(rel, "/") }

// dedupeNested sorts paths and drops those under another one ("." covers
// everything).
func dedupeNested(ps []string) []string {
	sort.Strings(ps)
	ps = slices.Compact(ps)
	if slices.Contains(ps, ".") {
		return []string{"."}
	}
	var out []string
	for _, p := range ps {
		if len(out) > 0 {
			last := out[len(out)-1]
			if strings.HasPrefix(p, last+"/") {
				continue
			}
		}
		out = append(out, p)
	}
	return out
}

// execRule is one Landlock execute rule: a file, or a folder and what is
// beneath it.
type execRule struct{ path string }

// bindExecPaths turns the --exec entries (absolute programs and globs)
// into Landlock rules, mounting read-only any root that the jail does not
// already contain. Globs that cover a whole tree ("/usr/local/go/**") give
// a rule on that folder; other globs are expanded to the files they match.
// The ELF interpreter (dynamic loader) of every program, and the
// interpreter named by a script's "#!" line, are added.
func bindExecPaths(entries []string, covered []string) ([]execRule, error) {
	var rules []execRule
	inside := func(p string) bool {
		for _, c := range covered {
			if p == c || strings.HasPrefix(p, c+"/") {
				return true
			}
		}
		return false
	}
	mount := func(p string) error {
		if inside(p) {
			return nil
		}
		if p == "/" || strings.HasPrefix(p, "/proc") || strings.HasPrefix(p, "/dev") || strings.HasPrefix(p, "/sys") || strings.HasPrefix(p, "/etc") {
			return fmt.Errorf("%q cannot be made executable", p)
		}
		if _, err := bindHost(p, true); err != nil {
			return err
		}
		covered = append(covered, p)
		return nil
	}
	var files []string
	for _, e := range entries {
		prefix, tree, literal := globRoot(e)
		if prefix == "" {
			prefix = "/"
		}
		switch {
		case literal:
			if err := mount(path.Clean(e)); err != nil {
				return nil, err
			}
			files = append(files, path.Clean(e))
		case tree:
			if err := mount(prefix); err != nil {
				return nil, err
			}
			rules = append(rules, execRule{prefix})
		default:
			if err := mount(prefix); err != nil {
				return nil, err
			}
			c, err := glob.Compile(e, '/')
			if err != nil {
				return nil, err
			}
			n := 0
			_ = filepath.WalkDir("/newroot"+prefix, func(p string, d fs.DirEntry, err error) error {
				if err != nil || n > maxWalkEntries {
					return fs.SkipDir
				}
				n++
				jp := strings.TrimPrefix(p, "/newroot")
				if !d.IsDir() && c.Match(jp) {
					files = append(files, jp)
				}
				return nil
			})
		}
	}
	seen := map[string]bool{}
	for len(files) > 0 {
		f := files[0]
		files = files[1:]
		if seen[f] {
			continue
		}
		seen[f] = true
		rules = append(rules, execRule{f})
		if interp := interpreterOf("/newroot" + f); interp != "" && !seen[interp] {
			if err := mount(interp); err != nil {
				return nil, err
			}
			files = append(files, interp)
		}
	}
	return rules, nil
}

// interpreterOf returns the absolute interpreter a file needs to run: the
// PT_INTERP of an ELF executable or the program of a "#!" line; "" for
// none.
func interpreterOf(p string) string {
	f, err := os.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	head := make([]byte, 256)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	if bytes.HasPrefix(head, []byte("#!")) {
		line, _, _ := bytes.Cut(head[2:], []byte("\n"))
		fields := strings.Fields(string(line))
		if len(fields) > 0 && path.IsAbs(fields[0]) {
			return path.Clean(fields[0])
		}
		return ""
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return ""
	}
	defer ef.Close()
	for _, prog := range ef.Progs {
		if prog.Type == elf.PT_INTERP {
			b, err := io.ReadAll(bufio.NewReader(prog.Open()))
			if err != nil {
				return ""
			}
			s := strings.TrimRight(string(b), "\x00")
			if path.IsAbs(s) {
				return path.Clean(s)
			}
		}
	}
	return ""
}

// setLimits applies the resource limits to this process; the program
// inherits them. Memory is RLIMIT_DATA, the writable private memory a
// process has actually mapped (heap, anonymous mappings, thread stacks):
// RLIMIT_AS would also count the address space Go and other runtimes only
// reserve, and break them far below any real use. RLIMIT_NPROC counts the
// tasks of the jail's user in its own user namespace, so it bounds this
// jail only; the helper's own threads are added to it. With a memory
// cgroup (perJail) the jail as a whole is bounded there instead, and the
// OOM killer's end is reported; RLIMIT_DATA is then left unset.
func setLimits(l Limits, perJail bool) error {
	threads := int64(0)
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Threads:"); ok {
				threads, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			}
		}
	}
	set := func(res int, v int64) error {
		return unix.Setrlimit(res, &unix.Rlimit{Cur: uint64(v), Max: uint64(v)})
	}
	mem := error(nil)
	if !perJail {
		mem = set(unix.RLIMIT_DATA, l.MemoryBytes)
	}
	return errors.Join(
		mem,
		set(unix.RLIMIT_NPROC, l.MaxProcesses+threads),
		// SIGXCPU at the limit (so the result can say why), SIGKILL a
		// second later for a program that catches it.
		unix.Setrlimit(unix.RLIMIT_CPU, &unix.Rlimit{Cur: uint64(l.CPUSeconds), Max: uint64(l.CPUSeconds) + 1}),
		set(unix.RLIMIT_FSIZE, l.FileSizeBytes),
		set(unix.RLIMIT_NOFILE, l.OpenFiles),
		set(unix.RLIMIT_CORE, 0),
	)
}

// dropCaps removes every capability: bounding set, ambient set, and the
// effective, permitted and inheritable sets of this thread.
func dropCaps() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return errors.New(errnoText(err))
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return errors.New(errnoText(err))
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return errors.New(errnoText(err))
	}
	return nil
}

// restrictExec applies a Landlock ruleset that handles execution (and TCP
// and scoping as the Landlock-only mode does): only the rules' files and
// folders can be executed.
func restrictExec(rules []execRule, network bool) error {
	abi, err := landlockABI()
	if err != nil || abi < 1 {
		return fmt.Errorf("unavailable: %v", errnoText(err))
	}
	rights := rightsFor(abi)
	attr := rulesetAttr{handledAccessFS: unix.LANDLOCK_ACCESS_FS_EXECUTE}
	if !network {
		attr.handledAccessNet = rights.net
		attr.scoped = rights.scoped
	} else {
		attr.scoped = rights.scoped & unix.LANDLOCK_SCOPE_SIGNAL
	}
	fd, err := createRuleset(&attr)
	if err != nil {
		return fmt.Errorf("creating ruleset: %v", errnoText(err))
	}
	defer unix.Close(fd)
	for _, r := range rules {
		if err := addRule(fd, r.path, unix.LANDLOCK_ACCESS_FS_EXECUTE, attr.handledAccessFS); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // a program that is not there cannot run anyway
			}
			return fmt.Errorf("exec rule: %v", errnoText(err))
		}
	}
	if err := restrictSelf(fd); err != nil {
		return fmt.Errorf("restrict_self: %v", errnoText(err))
	}
	return nil
}
