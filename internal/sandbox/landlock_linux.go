package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Landlock access rights by the ABI version that introduced them. The
// handled set of a ruleset is masked to what the kernel's ABI knows, since
// a ruleset naming an unknown right is refused with EINVAL.
const (
	// fsRightsV1 are the rights of ABI 1 (Linux 5.13).
	fsRightsV1 = unix.LANDLOCK_ACCESS_FS_EXECUTE |
		unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_DIR |
		unix.LANDLOCK_ACCESS_FS_REMOVE_FILE |
		unix.LANDLOCK_ACCESS_FS_MAKE_CHAR |
		unix.LANDLOCK_ACCESS_FS_MAKE_DIR |
		unix.LANDLOCK_ACCESS_FS_MAKE_REG |
		unix.LANDLOCK_ACCESS_FS_MAKE_SOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_FIFO |
		unix.LANDLOCK_ACCESS_FS_MAKE_BLOCK |
		unix.LANDLOCK_ACCESS_FS_MAKE_SYM

	// fsReadRights are handled only when Policy.ReadableDirs is given.
	fsReadRights = unix.LANDLOCK_ACCESS_FS_EXECUTE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_DIR

	// fsWriteRights is every right that changes the filesystem or a device,
	// across all ABIs this package knows: REFER (ABI 2), TRUNCATE (ABI 3)
	// and IOCTL_DEV (ABI 5) included.
	fsWriteRights = (fsRightsV1 &^ fsReadRights) |
		unix.LANDLOCK_ACCESS_FS_REFER |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE |
		unix.LANDLOCK_ACCESS_FS_IOCTL_DEV

	// fsFileRights are the only rights a rule on a non-directory may carry.
	fsFileRights = unix.LANDLOCK_ACCESS_FS_EXECUTE |
		unix.LANDLOCK_ACCESS_FS_WRITE_FILE |
		unix.LANDLOCK_ACCESS_FS_READ_FILE |
		unix.LANDLOCK_ACCESS_FS_TRUNCATE |
		unix.LANDLOCK_ACCESS_FS_IOCTL_DEV

	// netTCPRights (ABI 4) are handled with no allow rule when the policy
	// denies the network, which denies every TCP connect and bind.
	netTCPRights = unix.LANDLOCK_ACCESS_NET_BIND_TCP |
		unix.LANDLOCK_ACCESS_NET_CONNECT_TCP
)

// rulesetAttr is struct landlock_ruleset_attr up to ABI 6. It is declared
// here rather than using unix.LandlockRulesetAttr so that the size passed to
// the kernel is exactly the fields this package fills in.
type rulesetAttr struct {
	handledAccessFS  uint64
	handledAccessNet uint64
	scoped           uint64
}

// pathBeneathAttr is struct landlock_path_beneath_attr, which the kernel
// declares packed: 12 bytes, the first 12 of this Go struct.
type pathBeneathAttr struct {
	allowedAccess uint64
	parentFd      int32
}

// abiRights is what one ABI version lets a ruleset handle.
type abiRights struct {
	fs, net, scoped uint64
}

// rightsFor masks the known rights to those of ABI version abi.
func rightsFor(abi int) abiRights {
	var r abiRights
	if abi < 1 {
		return r
	}
	r.fs = fsRightsV1
	if abi >= 2 {
		r.fs |= unix.LANDLOCK_ACCESS_FS_REFER
	}
	if abi >= 3 {
		r.fs |= unix.LANDLOCK_ACCESS_FS_TRUNCATE
	}
	if abi >= 4 {
		r.net = netTCPRights
	}
	if abi >= 5 {
		r.fs |= unix.LANDLOCK_ACCESS_FS_IOCTL_DEV
	}
	if abi >= 6 {
		r.scoped = unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | unix.LANDLOCK_SCOPE_SIGNAL
	}
	return r
}

// devices stay usable under any policy: programs routinely open them, and
// none of them reaches a file. Missing ones (e.g. no /dev/tty in a
// container) are skipped.
var devices = []struct {
	path   string
	access uint64
}{
	{"/dev/null", fsFileRights &^ unix.LANDLOCK_ACCESS_FS_EXECUTE},
	{"/dev/zero", fsFileRights &^ unix.LANDLOCK_ACCESS_FS_EXECUTE},
	{"/dev/full", fsFileRights &^ unix.LANDLOCK_ACCESS_FS_EXECUTE},
	{"/dev/tty", fsFileRights &^ unix.LANDLOCK_ACCESS_FS_EXECUTE},
	{"/dev/random", unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV},
	{"/dev/urandom", unix.LANDLOCK_ACCESS_FS_READ_FILE | unix.LANDLOCK_ACCESS_FS_IOCTL_DEV},
}

func landlockABI() (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}

func createRuleset(attr *rulesetAttr) (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET,
		uintptr(unsafe.Pointer(attr)), unsafe.Sizeof(*attr), 0)
	if errno != 0 {
		return -1, errno
	}
	return int(r), nil
}

func addPathRule(rulesetFd int, attr *pathBeneathAttr) error {
	_, _, errno := unix.Syscall6(unix.SYS_LANDLOCK_ADD_RULE,
		uintptr(rulesetFd), unix.LANDLOCK_RULE_PATH_BENEATH, uintptr(unsafe.Pointer(attr)), 0, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func restrictSelf(rulesetFd int) error {
	_, _, errno := unix.Syscall(unix.SYS_LANDLOCK_RESTRICT_SELF, uintptr(rulesetFd), 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

// probeKernel asks for the ABI version, then builds (without applying) the
// same kind of ruleset Main builds, so that a kernel or seccomp filter that
// answers the version query but refuses rulesets is reported as "none".
func probeKernel() Status {
	abi, err := landlockABI()
	switch {
	case errors.Is(err, unix.ENOSYS):
		return Status{Mechanism: MechanismNone, Reason: "kernel has no Landlock support (Linux < 5.13 or not built in)"}
	case errors.Is(err, unix.EOPNOTSUPP):
		return Status{Mechanism: MechanismNone, Reason: "Landlock is disabled in this kernel (not in the lsm= boot list)"}
	case err != nil:
		return Status{Mechanism: MechanismNone, Reason: "Landlock version query failed: " + err.Error()}
	case abi < 1:
		return Status{Mechanism: MechanismNone, Reason: fmt.Sprintf("unexpected Landlock ABI %d", abi)}
	}
	rights := rightsFor(abi)
	attr := rulesetAttr{handledAccessFS: rights.fs, handledAccessNet: rights.net, scoped: rights.scoped}
	fd, err := createRuleset(&attr)
	if err != nil {
		return Status{Mechanism: MechanismNone, ABI: abi, Reason: "Landlock ruleset creation refused: " + err.Error()}
	}
	defer unix.Close(fd)
	if err := addRule(fd, "/", rights.fs&fsReadRights, rights.fs); err != nil {
		return Status{Mechanism: MechanismNone, ABI: abi, Reason: "Landlock rule refused: " + err.Error()}
	}
	st := Status{Mechanism: MechanismLandlock, ABI: abi, Filesystem: true}
	if err := seccompAvailable(); err != nil {
		st.Reason = "network not confined: " + err.Error()
		return st
	}
	st.Network = true
	st.Reason = networkCoverage(abi)
	return st
}

// networkCoverage says what "no network" means at Landlock ABI abi, so that
// /v1/policy can show it rather than a bare "yes".
func networkCoverage(abi int) string {
	s := "without network: only AF_UNIX sockets can be created and io_uring is refused (seccomp)"
	if abi >= 4 {
		s += "; TCP connect/bind denied (Landlock)"
	}
	if abi >= 6 {
		s += "; abstract unix sockets outside the command unreachable; pathname unix sockets stay reachable"
	} else {
		s += "; existing unix sockets (pathname and abstract) stay reachable"
	}
	return s
}

// addRule allows access beneath path. Rights outside handled are dropped
// (the kernel refuses them), and so are directory-only rights on a file.
func addRule(rulesetFd int, path string, access, handled uint64) error {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	access &= handled
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		access &= fsFileRights
	}
	if access == 0 {
		return nil
	}
	return addPathRule(rulesetFd, &pathBeneathAttr{allowedAccess: access, parentFd: int32(fd)})
}

// confineAndExec applies cfg to the calling thread and execs path. It
// returns only on failure, with the exit status to use.
func confineAndExec(cfg helperConfig, path string, argv, env []string) (int, error) {
	// no_new_privs and the Landlock domain are per thread; the exec must
	// happen on the thread that carries them. The thread is never unlocked:
	// the process either execs or exits.
	runtime.LockOSThread()
	if err := confine(cfg); err != nil {
		return ExitConfineFailed, err
	}
	err := unix.Exec(path, argv, env)
	if errors.Is(err, unix.ENOENT) {
		return ExitNotFound, errors.New("command not found")
	}
	return ExitConfineFailed, fmt.Errorf("cannot run command: %v", errnoText(err))
}

// confine restricts the calling thread according to cfg.
func confine(cfg helperConfig) error {
	abi, err := landlockABI()
	if err != nil || abi < 1 {
		return fmt.Errorf("cannot confine command: Landlock unavailable: %v", errnoText(err))
	}
	rights := rightsFor(abi)
	attr := rulesetAttr{handledAccessFS: rights.fs &^ fsReadRights}
	if len(cfg.read) > 0 {
		attr.handledAccessFS = rights.fs
	}
	if !cfg.network {
		attr.handledAccessNet = rights.net
	}
	// Signal scoping keeps the command from signalling the gateway or any
	// process outside its own tree; abstract unix sockets are a network in
	// all but name, so they are scoped with it.
	attr.scoped = rights.scoped & unix.LANDLOCK_SCOPE_SIGNAL
	if !cfg.network {
		attr.scoped |= rights.scoped & unix.LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
	}
	fd, err := createRuleset(&attr)
	if err != nil {
		return fmt.Errorf("cannot confine command: creating ruleset: %v", errnoText(err))
	}
	defer unix.Close(fd)

	handled := attr.handledAccessFS
	for i, d := range cfg.write {
		if err := addRule(fd, d, fsWriteRights|fsReadRights, handled); err != nil {
			return fmt.Errorf("cannot confine command: writable directory %d: %v", i+1, errnoText(err))
		}
	}
	for i, d := range cfg.read {
		if err := addRule(fd, d, fsReadRights, handled); err != nil {
			return fmt.Errorf("cannot confine command: readable directory %d: %v", i+1, errnoText(err))
		}
	}
	for _, dev := range devices {
		err := addRule(fd, dev.path, dev.access|unix.LANDLOCK_ACCESS_FS_READ_FILE, handled)
		if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENXIO) {
			return fmt.Errorf("cannot confine command: device rule: %v", errnoText(err))
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("cannot confine command: no_new_privs: %v", errnoText(err))
	}
	if err := restrictSelf(fd); err != nil {
		return fmt.Errorf("cannot confine command: restrict_self: %v", errnoText(err))
	}
	// Where Probe reported the filter available, failing to install it is
	// fatal like any other step; where it did not, Probe().Network already
	// says the network is not confined.
	if !cfg.network && seccompAvailable() == nil {
		if err := installNoNetworkFilter(); err != nil {
			return fmt.Errorf("cannot confine command: seccomp: %v", errnoText(err))
		}
	}
	return nil
}

// errnoText renders an error without the path an *os.PathError would
// carry: the helper's stderr reaches the model.
func errnoText(err error) string {
	if err == nil {
		return "unknown error"
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// restrictExec applies the jail's Landlock ruleset to the calling thread:
// only paths (and the helper binary open as helperFD, which the init and
// the payload are) may be executed; abstract unix sockets and signals are
// scoped to the jail whatever the network (another tenant's jail shares
// the host's network namespace when both have the network obligation);
// without network, TCP connect and bind are refused too.
func restrictExec(paths []string, helperFD int, network bool) error {
	abi, err := landlockABI()
	if err != nil || abi < 1 {
		return fmt.Errorf("unavailable: %v", errnoText(err))
	}
	rights := rightsFor(abi)
	attr := rulesetAttr{handledAccessFS: unix.LANDLOCK_ACCESS_FS_EXECUTE, scoped: rights.scoped}
	if !network {
		attr.handledAccessNet = rights.net
	}
	fd, err := createRuleset(&attr)
	if err != nil {
		return fmt.Errorf("creating ruleset: %v", errnoText(err))
	}
	defer unix.Close(fd)
	for _, p := range paths {
		if err := addRule(fd, p, unix.LANDLOCK_ACCESS_FS_EXECUTE, attr.handledAccessFS); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // a program that is not there cannot run anyway
			}
			return fmt.Errorf("exec rule: %v", errnoText(err))
		}
	}
	if err := addPathRule(fd, &pathBeneathAttr{allowedAccess: unix.LANDLOCK_ACCESS_FS_EXECUTE, parentFd: int32(helperFD)}); err != nil {
		return fmt.Errorf("helper rule: %v", errnoText(err))
	}
	if err := restrictSelf(fd); err != nil {
		return fmt.Errorf("restrict_self: %v", errnoText(err))
	}
	return nil
}
