package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gobwas/glob"
	"golang.org/x/sys/unix"
)

// Stage 2 of the helper builds the jail. It runs as PID 1 of fresh PID,
// mount, IPC, UTS, cgroup, (network) and user namespaces that stage 1
// asked the kernel for, holding CAP_SYS_ADMIN only inside its own user
// namespace (an ambient capability), before any program exists, and:
//
//  1. builds a new root on a tmpfs: the system folders read-only and not
//     executable, the system library folders executable, a minimal /etc, a
//     few devices, its own /proc and /tmp, and the workspace at its mount
//     point;
//  2. makes the workspace read-only except the write paths, hides the
//     hidden paths under empty read-only mounts and pins their ancestors
//     (a mount point cannot be renamed, so a hidden file cannot be moved
//     out from under its glob);
//  3. keeps executable only the files the decision runs: one bind mount
//     per approved program, interpreter and outside library, the
//     exec_paths, and nothing else (a loader's mmap(PROT_EXEC) of a file on
//     a noexec mount fails);
//  4. pivots into the new root and detaches the old one.
//
// The rest (limits, capabilities, no_new_privs, Landlock, seccomp, then
// the init) is in stage_linux.go.

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

// jailBase is where the helper mounts its scratch tmpfs; the host's copy of
// it stays reachable under /oldroot until the old root is detached.
const jailBase = "/tmp"

// bindHost mounts the host's path p (a folder or file) read-only at the same
// place in the new root, or recreates it when it is a symlink. It reports
// false when the host has no such path.
func bindHost(p string, recursive bool) (bool, error) {
	return bindHostAt(p, p, recursive, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC, 0)
}

// bindHostAt mounts the host's path src at dst in the new root with the
// attributes set (and clr cleared).
func bindHostAt(srcPath, dstPath string, recursive bool, set, clr uint64) (bool, error) {
	src, dst := "/oldroot"+srcPath, "/newroot"+dstPath
	fi, err := os.Lstat(src)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, errors.New(errnoText(err))
	}
	if _, err := os.Lstat(dst); err == nil && fi.Mode()&fs.ModeSymlink == 0 {
		// The mount point exists (inside a folder mounted already): mount
		// over it.
		return true, bindAt(src, dst, recursive, set, clr)
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
	return true, bindAt(src, dst, recursive, set, clr)
}

// bindAt bind-mounts src at dst and sets and clears attributes of the new
// mount.
func bindAt(src, dst string, recursive bool, set, clr uint64) error {
	flags := uintptr(unix.MS_BIND)
	if recursive {
		flags |= unix.MS_REC
	}
	if err := unix.Mount(src, dst, "", flags, ""); err != nil {
		return errors.New(errnoText(err))
	}
	return setattr(dst, set, clr, recursive)
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

// buildWorkspace mounts the workspace at its mount point (the mount tree
// a root gateway cloned, or a bind of the host folder; not executable),
// then applies write paths, hidden paths and pins.
func buildWorkspace(s *jailSpec, tree int) error {
	w := "/newroot" + s.MountAt
	if err := os.MkdirAll(w, 0o755); err != nil {
		return err
	}
	if tree >= 0 {
		err := unix.MoveMount(tree, "", unix.AT_FDCWD, w, unix.MOVE_MOUNT_F_EMPTY_PATH)
		unix.Close(tree)
		if err != nil {
			return fmt.Errorf("the workspace's mount tree: %v", errnoText(err))
		}
	} else if err := unix.Mount("/oldroot"+s.Workspace, w, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return errors.New(errnoText(err))
	}
	if err := setattr(w, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC, 0, true); err != nil {
		return err
	}
	plan, err := planWorkspace(w, s.Hide, s.Writable)
	if err != nil {
		return err
	}
	if !s.WSWritable {
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

// buildJail does steps 1-4 on the calling thread and leaves it in the
// working folder dir (a jail path). It returns the paths (in the jail) to
// give Landlock's execute right.
func buildJail(s *jailSpec, dir string, tree int) ([]string, error) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("making mounts private: %v", errnoText(err))
	}
	if err := unix.Mount("tmpfs", jailBase, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=1m"); err != nil {
		return nil, fmt.Errorf("scratch tmpfs: %v", errnoText(err))
	}
	for _, d := range []string{"newroot", "oldroot"} {
		if err := os.Mkdir(jailBase+"/"+d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := unix.PivotRoot(jailBase, jailBase+"/oldroot"); err != nil {
		return nil, fmt.Errorf("pivot_root: %v", errnoText(err))
	}
	if err := unix.Chdir("/"); err != nil {
		return nil, err
	}
	// Placeholders mounted over hidden paths: empty, mode 0, read-only.
	if err := os.Mkdir("/hidden-dir", 0); err != nil {
		return nil, err
	}
	if err := os.WriteFile("/hidden-file", nil, 0); err != nil {
		return nil, err
	}
	if err := errors.Join(os.Chmod("/hidden-dir", 0), os.Chmod("/hidden-file", 0)); err != nil {
		return nil, err
	}
	const nr = "/newroot"
	if err := unix.Mount("tmpfs", nr, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0755,size=1m"); err != nil {
		return nil, fmt.Errorf("root tmpfs: %v", errnoText(err))
	}
	for _, d := range systemDirs {
		if _, err := bindHost(d, true); err != nil {
			return nil, fmt.Errorf("system folder %s: %v", d, err)
		}
	}
	const execAttrs = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	for _, t := range s.ExecTrees {
		if _, err := bindHostAt(t, t, true, execAttrs, unix.MOUNT_ATTR_NOEXEC); err != nil {
			return nil, fmt.Errorf("executable folder: %v", err)
		}
	}
	for _, f := range s.NoExec {
		if _, err := bindHostAt(f, f, false, execAttrs|unix.MOUNT_ATTR_NOEXEC, 0); err != nil {
			return nil, fmt.Errorf("covering a program: %v", err)
		}
	}
	if err := buildEtc(); err != nil {
		return nil, fmt.Errorf("/etc: %v", err)
	}
	if err := buildDev(); err != nil {
		return nil, fmt.Errorf("/dev: %v", err)
	}
	if err := os.Mkdir(nr+"/proc", 0o555); err != nil {
		return nil, err
	}
	if err := unix.Mount("proc", nr+"/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return nil, fmt.Errorf("/proc: %v", errnoText(err))
	}
	if err := os.Mkdir(nr+"/tmp", 0o1777); err != nil {
		return nil, err
	}
	tmpFlags := uintptr(unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC)
	if s.TmpExec {
		tmpFlags &^= unix.MS_NOEXEC
	}
	tmpSize := strconv.FormatInt(min(s.Limits.FileSizeBytes, s.Limits.MemoryBytes), 10)
	if err := unix.Mount("tmpfs", nr+"/tmp", "tmpfs", tmpFlags, "mode=1777,size="+tmpSize); err != nil {
		return nil, fmt.Errorf("/tmp: %v", errnoText(err))
	}
	if err := buildWorkspace(s, tree); err != nil {
		return nil, fmt.Errorf("workspace: %v", err)
	}
	rights, err := bindExec(s)
	if err != nil {
		return nil, fmt.Errorf("executables: %v", err)
	}
	// The root itself is read-only: a program writes only to /tmp and the
	// workspace's write paths.
	if err := setattr(nr, unix.MOUNT_ATTR_RDONLY, 0, false); err != nil {
		return nil, fmt.Errorf("read-only root: %v", err)
	}
	// pivot_root(".", ".") stacks the old root under the new one; the
	// detach then removes every host mount from this namespace.
	if err := unix.Chdir(nr); err != nil {
		return nil, err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return nil, fmt.Errorf("pivot_root: %v", errnoText(err))
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return nil, fmt.Errorf("detaching the host: %v", errnoText(err))
	}
	if err := unix.Chdir(dir); err != nil {
		return nil, fmt.Errorf("working folder: %v", errnoText(err))
	}
	_ = unix.Sethostname([]byte("toolgate"))
	return rights, nil
}

// bindExec makes the spec's executable files executable (a bind mount of
// each over itself, read-only but for workspace files, which keep their
// mount's writability), and the workspace's exec paths; a workspace
// script's "#!" interpreter comes along. It returns the jail paths to
// give Landlock's execute right.
func bindExec(s *jailSpec) ([]string, error) {
	const execAttrs = unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV
	rights := slices.Clone(s.ExecRights)
	inWorkspace := func(p string) bool { return p == s.MountAt || strings.HasPrefix(p, s.MountAt+"/") }
	var scripts []string
	execHere := func(p string, recursive bool) error {
		jp := "/newroot" + p
		flags := uintptr(unix.MS_BIND)
		if recursive {
			flags |= unix.MS_REC
		}
		if err := unix.Mount(jp, jp, "", flags, ""); err != nil {
			if errors.Is(err, unix.ENOENT) {
				return nil // nothing there: nothing to run
			}
			return errors.New(errnoText(err))
		}
		return setattr(jp, 0, unix.MOUNT_ATTR_NOEXEC, recursive)
	}
	for _, f := range s.ExecFiles {
		if inWorkspace(f) {
			if err := execHere(f, false); err != nil {
				return nil, err
			}
			scripts = append(scripts, f)
			continue
		}
		if _, err := bindHostAt(f, f, false, execAttrs, unix.MOUNT_ATTR_NOEXEC); err != nil {
			return nil, err
		}
	}
	if len(s.WorkspaceExec) > 0 {
		w := "/newroot" + s.MountAt
		for _, g := range s.WorkspaceExec {
			prefix, tree, literal := globRoot(g)
			switch {
			case literal:
				p := path.Join(s.MountAt, path.Clean(g))
				if err := execHere(p, false); err != nil {
					return nil, err
				}
				scripts = append(scripts, p)
				rights = append(rights, p)
			case tree:
				p := path.Join(s.MountAt, prefix)
				if err := execHere(p, true); err != nil {
					return nil, err
				}
				rights = append(rights, p)
			default:
				c, err := glob.Compile(g, '/')
				if err != nil {
					return nil, err
				}
				n := 0
				root := path.Join(w, prefix)
				err = filepath.WalkDir(root, func(fp string, d fs.DirEntry, err error) error {
					if err != nil {
						return nil
					}
					if n++; n > maxWalkEntries {
						return fmt.Errorf("workspace has more than %d entries", maxWalkEntries)
					}
					rel := strings.TrimPrefix(fp, w+"/")
					if d.Type().IsRegular() && c.Match(rel) {
						p := path.Join(s.MountAt, rel)
						if err := execHere(p, false); err != nil {
							return err
						}
						scripts = append(scripts, p)
						rights = append(rights, p)
					}
					return nil
				})
				if err != nil {
					return nil, err
				}
			}
		}
	}
	// A workspace script runs its "#!" program: the kernel opens it with
	// the execute check, so it must be executable too. Read here, inside
	// the jail, as the jail's user (never by the gateway).
	for _, sc := range scripts {
		interp := scriptInterpreter("/newroot" + sc)
		if interp == "" || inWorkspace(interp) {
			continue
		}
		real, err := resolveIn("/oldroot", interp)
		if err != nil || reservedExecRoot(real) {
			continue // it cannot run
		}
		if !underAny(real, s.ExecTrees) {
			if _, err := bindHostAt(real, real, false, execAttrs, unix.MOUNT_ATTR_NOEXEC); err != nil {
				return nil, err
			}
		}
		rights = append(rights, real)
	}
	return rights, nil
}

// scriptInterpreter reads the "#!" program of the file at p without ever
// blocking (a FIFO under the name is not a script).
func scriptInterpreter(p string) string {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return ""
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return ""
	}
	head := make([]byte, 256)
	n, _ := unix.Read(fd, head)
	if n <= 0 {
		return ""
	}
	return shebangOf(head[:n])
}

// resolveIn resolves the absolute path p inside root (symlinks, absolute
// ones included, stay inside root) and returns it relative to root, as an
// absolute path.
func resolveIn(root, p string) (string, error) {
	cur := "/"
	todo := strings.Split(strings.TrimPrefix(path.Clean(p), "/"), "/")
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		if c == "" || c == "." {
			continue
		}
		if c == ".." {
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		fi, err := os.Lstat(root + next)
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if hops++; hops > 40 {
			return "", errors.New("too many links")
		}
		t, err := os.Readlink(root + next)
		if err != nil {
			return "", err
		}
		if path.IsAbs(t) {
			cur = "/"
		}
		todo = append(strings.Split(t, "/"), todo...)
	}
	return cur, nil
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
	// A helper built with the race detector (tests only) starts the
	// jail's init and interpreter with the detector's shadow memory, far
	// more than RLIMIT_DATA allows: such jails are bounded by a memory
	// cgroup, where there is one, only.
	if !perJail && !raceEnabled {
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
