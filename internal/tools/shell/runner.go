package shell

import (
	"os"

	"github.com/toolgate/toolgate/internal/command"
	"github.com/toolgate/toolgate/internal/sandbox"
)

// JailRunner runs each command in a jail of its own: the interpreter and
// everything it starts, with the workspace at sandbox.DefaultMountAt.
type JailRunner struct {
	Jailer *sandbox.Jailer
	// Limits are the configured ceilings of a jail; a call's obligations
	// only tighten them.
	Limits sandbox.Limits
	// Allow, when set, refuses a workspace the command may not run in.
	Allow func(workspace string) error
	// CPUWeight, when set, is a tenant's share of a contended CPU
	// (1-10000): every jail of a tenant joins one CPU cgroup of that
	// weight. nil leaves jails out of CPU cgroups.
	CPUWeight func(tenant string) int
}

// Path implements Runner.
func (r JailRunner) Path(string) string { return sandbox.DefaultMountAt }

// Start implements Runner: the jail is built from the call's decision
// (write paths, hidden paths, exec paths, network, memory and process
// limits).
func (r JailRunner) Start(c Confinement, spec []byte, stdin, out *os.File) (*sandbox.Running, error) {
	if r.Allow != nil {
		if err := r.Allow(c.Workspace); err != nil {
			return nil, err
		}
	}
	lim := r.Limits.Tighten(sandbox.Limits{MemoryBytes: c.Limits.MemoryBytes, MaxProcesses: c.Limits.MaxProcesses,
		FileSizeBytes: c.FileSizeBytes})
	var group string
	var weight int
	if r.CPUWeight != nil && c.Tenant != "" {
		group, weight = c.Tenant, r.CPUWeight(c.Tenant)
	}
	return r.Jailer.Start(sandbox.Job{
		Jail: sandbox.Jail{
			CPUGroup:   group,
			CPUWeight:  weight,
			Workspace:  c.Workspace,
			MountAt:    sandbox.DefaultMountAt,
			Hide:       c.Limits.ExcludePaths,
			WritePaths: c.Limits.WritePaths,
			Programs:   c.Programs,
			ExecPaths:  c.Limits.ExecPaths,
			Network:    c.Limits.Network,
			Limits:     lim,
		},
		Run:    sandbox.Run{Payload: command.PayloadName, Data: spec},
		Stdin:  stdin,
		Stdout: out,
	})
}

// LandlockRunner runs each command's interpreter under the Landlock-only
// confinement (development only): writes bounded to the workspace, no
// network, the host readable, the workspace at its host path.
type LandlockRunner struct {
	// Self is the helper binary; "" means os.Executable().
	Self  string
	Allow func(workspace string) error
}

// Path implements Runner.
func (r LandlockRunner) Path(host string) string { return host }

// Start implements Runner.
func (r LandlockRunner) Start(c Confinement, spec []byte, stdin, out *os.File) (*sandbox.Running, error) {
	if r.Allow != nil {
		if err := r.Allow(c.Workspace); err != nil {
			return nil, err
		}
	}
	run := sandbox.Run{Payload: command.PayloadName, Data: spec, Dir: c.Workspace}
	writable := []string{c.Workspace}
	if c.Limits.WritePaths != nil && len(c.Limits.WritePaths) == 0 {
		writable = nil // read-only (a full workspace)
	}
	return sandbox.StartLandlock(sandbox.Job{Run: run, Stdin: stdin, Stdout: out}, sandbox.Policy{WritableDirs: writable}, r.Self)
}
