package sandbox

import (
	"errors"
	"fmt"
	"path"
	"strconv"
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
	MechanismIDMap      = "idmapped-workspace"
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
	// It is mounted at the same path inside the jail, and it is the only
	// part of the host's files the program sees besides the read-only
	// system folders.
	Workspace string
	// Hide are workspace-relative globs (OPA glob.match with "/" as the
	// delimiter) whose matches do not exist for the program: not
	// readable, not listable, not writable.
	Hide []string
	// WritePaths, when non-nil, are the workspace-relative globs the
	// program may write; everything else in the workspace is read-only.
	// nil means the whole workspace is writable (hidden paths excepted).
	WritePaths []string
	// Programs are the absolute paths of the binaries the call's
	// approved segments run; ExecPaths adds absolute paths or globs
	// ("/usr/local/go/**"). Nothing else can be executed (the dynamic
	// loader excepted).
	Programs  []string
	ExecPaths []string
	// Network gives the jail the host's network; otherwise it has its own
	// network namespace with no interface and a seccomp filter that
	// refuses non-unix sockets.
	Network bool
	Limits  Limits
}

// maxJailArgs bounds how many path entries one jail may carry, so a hostile
// workspace cannot make the helper's command line unbounded.
const maxJailArgs = 4096

// jailArgs encodes j as helper flags (after "--jail").
func jailArgs(j Jail) ([]string, error) {
	if !path.IsAbs(j.Workspace) || strings.ContainsRune(j.Workspace, 0) {
		return nil, errors.New("sandbox: jail workspace must be an absolute path")
	}
	if n := len(j.Hide) + len(j.WritePaths) + len(j.Programs) + len(j.ExecPaths); n > maxJailArgs {
		return nil, fmt.Errorf("sandbox: jail has %d path rules, more than %d", n, maxJailArgs)
	}
	out := []string{"--jail", "--ws=" + path.Clean(j.Workspace)}
	for _, g := range j.Hide {
		if err := checkGlob(g, false); err != nil {
			return nil, err
		}
		out = append(out, "--hide="+g)
	}
	if j.WritePaths == nil {
		out = append(out, "--ws-writable")
	}
	for _, g := range j.WritePaths {
		if err := checkGlob(g, false); err != nil {
			return nil, err
		}
		out = append(out, "--writable="+g)
	}
	for _, p := range j.Programs {
		if !path.IsAbs(p) {
			return nil, errors.New("sandbox: program paths must be absolute")
		}
		out = append(out, "--exec="+p)
	}
	for _, g := range j.ExecPaths {
		if err := checkGlob(g, true); err != nil {
			return nil, err
		}
		out = append(out, "--exec="+g)
	}
	if j.Network {
		out = append(out, "--net")
	}
	l := j.Limits.WithDefaults()
	out = append(out,
		"--mem="+strconv.FormatInt(l.MemoryBytes, 10),
		"--nproc="+strconv.FormatInt(l.MaxProcesses, 10),
		"--cpu="+strconv.FormatInt(l.CPUSeconds, 10),
		"--fsize="+strconv.FormatInt(l.FileSizeBytes, 10),
		"--nofile="+strconv.FormatInt(l.OpenFiles, 10),
	)
	return out, nil
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
	// limits, idmapped-workspace.
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
	// Helper names the binary that builds the jails: "toolgate-sandbox"
	// (the dedicated helper) or "gateway" (the gateway re-executing
	// itself). Never a host path.
	Helper string `json:"helper,omitempty"`
	// Reason says why the jail is not ready. It never names host paths.
	Reason string `json:"reason,omitempty"`
}

// JailerOptions configure NewJailer.
type JailerOptions struct {
	// Self is the helper binary (normally the gateway binary): it must
	// dispatch "sandbox-exec" to [Main]. "" means os.Executable().
	Self string
	// UID and GID are the host ids programs run as when the gateway runs
	// as root (config sandbox.uid/gid); 0 means 65534 (nobody). A gateway
	// that is not root runs programs as its own uid, in a user namespace,
	// without capabilities.
	UID, GID int
	// NoCgroup bounds memory per process (RLIMIT_DATA) even where a
	// per-jail memory cgroup could be made.
	NoCgroup bool
	// Env is added to the environment of the probe run (tests use it to
	// make their binary act as the helper).
	Env []string
}
