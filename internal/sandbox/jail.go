package sandbox

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/gobwas/glob"
)

// Modes of the command jail (config sandbox.mode).
const (
	// ModeJail runs every program in its own namespaces (mount, PID, IPC,
	// UTS, network, user) with a filesystem view built from the decision;
	// where the kernel cannot build one, commands are not offered.
	ModeJail = "jail"
	// ModeLandlockOnly is the older, weaker confinement (writes bounded to
	// the workspace, no network, the whole host readable). Development
	// only.
	ModeLandlockOnly = "landlock-only"
)

// Mechanism names reported by [JailStatus.Mechanisms].
const (
	MechanismNamespaces = "namespaces"
	MechanismSeccomp    = "seccomp"
	MechanismLimits     = "limits"
	// MechanismNoExec: every mount is noexec but the approved programs,
	// their interpreters and libraries and the exec paths.
	MechanismNoExec = "noexec"
)

// Default resource limits of a jailed program. Obligations only tighten
// them.
const (
	DefaultMemoryBytes   = 1 << 30 // writable private memory per process (RLIMIT_DATA)
	DefaultMaxProcesses  = 128     // tasks (processes and threads) of the jail's user
	DefaultCPUSeconds    = 120     // CPU time per process
	DefaultFileSizeBytes = 1 << 30 // largest file a program may write
	DefaultOpenFiles     = 1024
)

// DefaultCPUWeight is a tenant's weight unless configured (cgroup v2's
// default; v1 shares are weight×1024/100).
const DefaultCPUWeight = 100

// DefaultUID and DefaultGID are the host ids programs run as when the
// gateway runs as root and none are configured: nobody.
const (
	DefaultUID = 65534
	DefaultGID = 65534
)

// Limits are the resource ceilings of one jailed program. Zero fields take
// the defaults above.
type Limits struct {
	MemoryBytes   int64
	MaxProcesses  int64
	CPUSeconds    int64
	FileSizeBytes int64
	OpenFiles     int64
}

// WithDefaults fills zero fields with the package defaults.
func (l Limits) WithDefaults() Limits {
	def := func(v *int64, d int64) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MemoryBytes, DefaultMemoryBytes)
	def(&l.MaxProcesses, DefaultMaxProcesses)
	def(&l.CPUSeconds, DefaultCPUSeconds)
	def(&l.FileSizeBytes, DefaultFileSizeBytes)
	def(&l.OpenFiles, DefaultOpenFiles)
	return l
}

// Tighten returns l with every field of o that is positive and smaller.
func (l Limits) Tighten(o Limits) Limits {
	t := func(v *int64, n int64) {
		if n > 0 && (*v <= 0 || n < *v) {
			*v = n
		}
	}
	t(&l.MemoryBytes, o.MemoryBytes)
	t(&l.MaxProcesses, o.MaxProcesses)
	t(&l.CPUSeconds, o.CPUSeconds)
	t(&l.FileSizeBytes, o.FileSizeBytes)
	t(&l.OpenFiles, o.OpenFiles)
	return l
}

// Jail is what one jailed program may see and do. It is built per call
// from the decision (obligations) and the prepared command.
type Jail struct {
	// Workspace is the host folder of the tenant's workspace (absolute).
	// It is mounted at MountAt inside the jail ("" means the same path),
	// and it is the only part of the host's files the program sees besides
	// the read-only system folders.
	Workspace string
	MountAt   string
	// Hide are workspace-relative globs (OPA glob.match with "/" as the
	// delimiter) whose matches do not exist for the program: not
	// readable, not listable, not writable.
	Hide []string
	// WritePaths, when non-nil, are the workspace-relative globs the
	// program may write; everything else in the workspace is read-only.
	// nil means the whole workspace is writable (hidden paths excepted).
	WritePaths []string
	// Programs are the absolute paths of the binaries the call's
	// approved segments run (host paths; a program in the workspace is
	// named by its host path too); ExecPaths adds absolute paths or globs
	// ("/usr/local/go/**"; "/tmp/**" for the jail's own /tmp; globs under
	// MountAt for the workspace). Nothing else can be executed or mapped
	// executable: the programs' interpreters and the libraries they load
	// excepted.
	Programs  []string
	ExecPaths []string
	// Network gives the jail the host's network; otherwise it has its own
	// network namespace with no interface and a seccomp filter that
	// refuses non-unix sockets. Abstract unix sockets and signals stay
	// scoped to the jail either way.
	Network bool
	Limits  Limits
	// CPUGroup names the group whose jails share one CPU cgroup (the
	// tenant); CPUWeight is its weight, 1-10000 (0: DefaultCPUWeight).
	// "" leaves the jail in no CPU group.
	CPUGroup  string
	CPUWeight int
}

// maxJailRules bounds how many path rules one jail may carry, so that a
// hostile obligation cannot make a jail's spec unbounded.
const maxJailRules = 4096

// DefaultMountAt is where the shell's jails mount the tenant's workspace:
// nothing of the host's paths is visible inside.
const DefaultMountAt = "/workspace"

// validate checks j before a jail is planned from it.
func (j Jail) validate() error {
	if !path.IsAbs(j.Workspace) || strings.ContainsRune(j.Workspace, 0) {
		return errors.New("sandbox: jail workspace must be an absolute path")
	}
	if j.MountAt != "" && (!path.IsAbs(j.MountAt) || path.Clean(j.MountAt) != j.MountAt || j.MountAt == "/" || reservedJailPath(j.MountAt)) {
		return fmt.Errorf("sandbox: cannot mount the workspace at %q", j.MountAt)
	}
	if n := len(j.Hide) + len(j.WritePaths) + len(j.Programs) + len(j.ExecPaths); n > maxJailRules {
		return fmt.Errorf("sandbox: jail has %d path rules, more than %d", n, maxJailRules)
	}
	for _, g := range j.Hide {
		if err := checkGlob(g, false); err != nil {
			return err
		}
	}
	for _, g := range j.WritePaths {
		if err := checkGlob(g, false); err != nil {
			return err
		}
	}
	for _, p := range j.Programs {
		if !path.IsAbs(p) || strings.ContainsRune(p, 0) {
			return errors.New("sandbox: program paths must be absolute")
		}
	}
	for _, g := range j.ExecPaths {
		if err := checkGlob(g, true); err != nil {
			return err
		}
	}
	return nil
}

// reservedJailPath reports paths the jail builds itself, where a workspace
// cannot be mounted.
func reservedJailPath(p string) bool {
	for _, r := range []string{"/proc", "/dev", "/sys", "/etc", "/tmp", "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		if p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// checkGlob validates one glob of a jail: it must compile and be relative
// (workspace globs) or absolute (exec globs), with no NUL.
func checkGlob(g string, absolute bool) error {
	if g == "" || strings.ContainsRune(g, 0) {
		return errors.New("sandbox: empty or invalid glob")
	}
	if path.IsAbs(g) != absolute {
		if absolute {
			return fmt.Errorf("sandbox: exec path %q must be absolute", g)
		}
		return fmt.Errorf("sandbox: workspace glob %q must be relative", g)
	}
	if _, err := glob.Compile(g, '/'); err != nil {
		return fmt.Errorf("sandbox: glob %q: %v", g, err)
	}
	return nil
}

// globRoot splits a glob into the literal folder it starts with and
// whether the glob covers that folder's whole tree: "src/**" is ("src",
// true), "docs/*.md" is ("docs", false), "README.md" is ("README.md",
// true) (a literal names exactly one path and everything below it only if
// it is a folder — callers treat literals as the path itself).
func globRoot(g string) (prefix string, tree bool, literal bool) {
	parts := strings.Split(g, "/")
	for i, p := range parts {
		if strings.ContainsAny(p, `*?[{\`) {
			prefix = strings.Join(parts[:i], "/")
			if prefix == "" {
				prefix = "."
			}
			return prefix, i == len(parts)-1 && p == "**", false
		}
	}
	return g, true, true
}

// Scopes of the memory limit (JailStatus.Memory).
const (
	MemoryPerJail    = "jail"
	MemoryPerProcess = "process"
)

// JailStatus is what /readyz and /v1/policy report about the jail.
type JailStatus struct {
	// Mode is ModeJail or ModeLandlockOnly.
	Mode string `json:"mode"`
	// Ready is true when commands can run in this mode.
	Ready bool `json:"ready"`
	// Mechanisms names what is active: namespaces, landlock, seccomp,
	// limits, noexec, cgroup-memory.
	Mechanisms []string `json:"mechanisms"`
	// UID and GID are the host ids jailed programs run as.
	UID int `json:"uid"`
	GID int `json:"gid"`
	// Memory says what the memory limit bounds: "jail" (all its processes
	// together, a cgroup; the OOM killer ends the biggest and the result
	// says "[killed: memory limit]") or "process" (each process's data,
	// RLIMIT_DATA; an allocation beyond it fails).
	Memory string `json:"memory,omitempty"`
	// MemoryReason says why memory is bounded per process only.
	MemoryReason string `json:"memory_reason,omitempty"`
	// CPU says how tenants share the CPU: "weight" (a CPU cgroup per
	// tenant, weighted) or "process" (as processes do); CPUReason why not
	// by weight.
	CPU       string `json:"cpu,omitempty"`
	CPUReason string `json:"cpu_reason,omitempty"`
	// Helper names the binary that builds the jails: "toolgate-sandbox"
	// (the dedicated helper) or "gateway" (the gateway re-executing
	// itself). Never a host path.
	Helper string `json:"helper,omitempty"`
	// Reason says why the jail is not ready. It never names host paths.
	Reason string `json:"reason,omitempty"`
	// Swept is how many jails of a previous gateway process (one that did
	// not exit cleanly) the start-up sweep killed.
	Swept int `json:"swept,omitempty"`
}

// JailerOptions configure NewJailer.
type JailerOptions struct {
	// Self is the helper binary (normally the gateway binary): it must
	// dispatch "sandbox-exec" to [Main]. "" means os.Executable().
	Self string
	// UID and GID are the host ids programs run as when the gateway runs
	// as root (config sandbox.uid/gid); 0 means DefaultUID/DefaultGID. A gateway
	// that is not root runs programs as its own uid, in a user namespace,
	// without capabilities.
	UID, GID int
	// NoCgroup bounds memory per process (RLIMIT_DATA) even where a
	// per-jail memory cgroup could be made.
	NoCgroup bool
	// Env is the environment of the probe run.
	Env []string
	// LibraryDirs are more folders whose shared objects jailed programs
	// may load, besides the system's (where libc lives).
	LibraryDirs []string
}
