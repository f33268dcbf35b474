package sandbox

import "errors"

// Mechanism names reported in [Status.Mechanism].
const (
	MechanismLandlock = "landlock"
	MechanismNone     = "none"
)

// SubCommand is the hidden gateway sub-command that runs [Main].
const SubCommand = "sandbox-exec"

// Exit statuses of [Main] when it does not reach the program. They follow
// the shell's convention: 126 "found but could not be run", 127 "not found".
const (
	ExitConfineFailed = 126
	ExitNotFound      = 127
)

// ErrNetworkUnscoped refuses a jail with the network obligation on a
// kernel whose Landlock cannot scope abstract unix sockets (ABI < 6):
// jails of other tenants would reach each other's.
var ErrNetworkUnscoped = errors.New("sandbox: the network obligation needs Landlock ABI 6 (Linux 6.12) to keep a jail's abstract unix sockets its own")

// ErrUnavailable is returned by [Wrap] when the kernel offers no confinement
// mechanism; the command is left unchanged. Test with errors.Is.
var ErrUnavailable = errors.New("sandbox: OS confinement unavailable")

// Policy is what one confined command may do.
type Policy struct {
	// WritableDirs are the only places the command may create, write,
	// truncate, rename or remove files; symlinks in the list are followed
	// once, here, and nothing beneath them leads out.
	// A few character devices (/dev/null, /dev/zero, /dev/full, /dev/tty)
	// stay writable; /tmp is NOT writable unless listed. Relative entries
	// are made absolute against the gateway's working directory.
	WritableDirs []string
	// ReadableDirs, when not empty, restricts reading and executing to these
	// directories plus WritableDirs. It must then cover the program, its
	// interpreter and its shared libraries (e.g. /usr, /bin, /lib, /lib64,
	// /etc, and /proc for programs that read it). Empty means the whole
	// filesystem stays readable.
	ReadableDirs []string
	// Network allows network access. When false, the command can create
	// no socket but AF_UNIX ones (a seccomp filter, which also refuses
	// io_uring), and with Landlock ABI >= 4 TCP connect and bind are denied
	// as well; with ABI >= 6 abstract unix sockets outside the command are
	// unreachable too. Where the filter is unavailable (CPU architecture
	// other than amd64/arm64, no seccomp) [Status.Network] is false and
	// only the Landlock TCP rules, if any, apply.
	Network bool
}

// Status is what confinement the running kernel supports. It is what the
// gateway reports in /readyz and /v1/policy.
type Status struct {
	// Mechanism is MechanismLandlock or MechanismNone.
	Mechanism string `json:"mechanism"`
	// ABI is the Landlock ABI version (0 when unavailable).
	ABI int `json:"abi"`
	// Filesystem is true when writes can be confined to WritableDirs.
	Filesystem bool `json:"filesystem"`
	// Network is true when Policy.Network=false is enforced: no IP (or
	// any non-unix) socket can be created.
	Network bool `json:"network"`
	// Reason explains why Mechanism is "none", or what an active
	// confinement does not cover. It never names host paths.
	Reason string `json:"reason,omitempty"`
}
