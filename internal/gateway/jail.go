package gateway

import (
	"errors"
	"log/slog"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/sandbox"
	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/tools/shell"
)

// commandJail is the confinement of commands and stdio MCP servers: built
// on first use (only a configuration with command tools or stdio upstreams
// pays for it), once, and closed with the gateway.
type commandJail struct {
	cfg        *config.Config
	log        *slog.Logger
	self       string // the helper binary
	workspaces []*tools.Workspace

	once     sync.Once
	jailer   *sandbox.Jailer    // nil unless commands run in the jail
	status   sandbox.JailStatus // reported by /readyz once started
	withheld string             // why commands are withheld ("" when they can run)
}

// helperName says which binary builds the jails, without its path.
func (c *commandJail) helperName() string {
	if filepath.Base(c.self) == HelperName {
		return HelperName
	}
	return "gateway"
}

// start prepares the confinement in the configured mode (once) and
// returns why commands must be withheld ("" when they can run). In jail
// mode a kernel that cannot build the jail withholds them (fail closed);
// landlock-only (development only) withholds them only where Landlock is
// missing.
func (c *commandJail) start() string {
	c.once.Do(func() { c.withheld = c.build() })
	return c.withheld
}

func (c *commandJail) build() string {
	sb := c.cfg.Sandbox
	if sb.Mode == sandbox.ModeLandlockOnly {
		st := sandbox.Probe()
		c.status = sandbox.JailStatus{Mode: sandbox.ModeLandlockOnly, Ready: st.Mechanism == sandbox.MechanismLandlock, Reason: st.Reason, Helper: c.helperName()}
		if c.status.Ready {
			c.status.Mechanisms = []string{sandbox.MechanismLandlock}
			if st.Network {
				c.status.Mechanisms = append(c.status.Mechanisms, sandbox.MechanismSeccomp)
			}
			c.log.Warn("sandbox.mode is landlock-only: commands can read the whole host (development only)")
			return ""
		}
		c.log.Error("commands withheld: no Landlock", "reason", st.Reason)
		return "commands withheld: " + st.Reason
	}
	j, st, err := sandbox.NewJailer(sandbox.JailerOptions{Self: c.self, UID: sb.UID, GID: sb.GID, NoCgroup: !sb.MemoryCgroup})
	st.Helper = c.helperName()
	c.status = st
	if err != nil {
		c.log.Error("commands withheld: the kernel cannot build the command jail", "reason", st.Reason)
		return "commands withheld: " + st.Reason
	}
	// Files a jail creates are the jail user's on the host; the tenants'
	// workspaces must be that user's for a jail to write in them.
	for name, t := range c.cfg.Tenants {
		if err := j.OwnWorkspace(t.Workspace); err != nil {
			j.Close()
			c.status = sandbox.JailStatus{Mode: sandbox.ModeJail, Reason: "cannot give the jail's user the workspace of tenant " + name}
			c.log.Error("commands withheld: cannot give the jail's user a workspace", "tenant", name, "err", err)
			return "commands withheld: " + c.status.Reason
		}
	}
	// And what the file tools create there is theirs too.
	uid, gid := j.UID()
	for _, ws := range c.workspaces {
		ws.SetOwner(uid, gid)
	}
	c.jailer = j
	return ""
}

// report is what /readyz says about the confinement of commands: nothing
// when it was never needed.
func (c *commandJail) report() any {
	if c == nil || c.status.Mode == "" {
		return nil
	}
	return c.status
}

// Close ends every jail still running.
func (c *commandJail) Close() error {
	if c.jailer == nil {
		return nil
	}
	return c.jailer.Close()
}

// limits are the configured resource limits of one jail.
func (c *commandJail) limits() sandbox.Limits {
	sb := c.cfg.Sandbox
	return sandbox.Limits{MemoryBytes: sb.MemoryBytes, MaxProcesses: sb.MaxProcesses, CPUSeconds: sb.CPUSeconds,
		FileSizeBytes: sb.FileSizeBytes, OpenFiles: sb.OpenFiles}
}

// runner is how the shell tool's commands run: the whole command —
// interpreter, redirections, globs, builtins and every program — in a jail
// built from the call's decision, or in landlock-only mode under the older
// confinement. A workspace that is no tenant's is refused.
func (c *commandJail) runner() shell.Runner {
	allow := func(ws string) error {
		for _, t := range c.cfg.Tenants {
			if ws == t.Workspace {
				return nil
			}
		}
		return errors.New("confine: the command's workspace is no tenant's")
	}
	if c.jailer == nil {
		if c.cfg.Sandbox.Mode == sandbox.ModeLandlockOnly {
			return shell.LandlockRunner{Self: c.self, Allow: allow}
		}
		return nil
	}
	return shell.JailRunner{Jailer: c.jailer, Limits: c.limits(), Allow: allow, CPUWeight: c.cfg.CPUWeight}
}

// wrapMCP starts a stdio MCP server in the command jail: its own empty
// folder as the only writable place (no tenant workspace), the program
// itself as the only executable besides the system folders, network only
// when configured, the configured resource limits. Without a jail the
// server does not start (it never runs unconfined).
func (c *commandJail) wrapMCP(cmd *exec.Cmd, dir, prog string, network bool) (func(), error) {
	if c.cfg.Sandbox.Mode != sandbox.ModeLandlockOnly {
		if reason := c.start(); reason != "" {
			c.log.Error("stdio MCP upstreams cannot start", "reason", reason)
		}
	}
	if c.jailer == nil {
		return nil, errors.New("no command jail (sandbox.mode jail on a kernel that can build it is required for stdio MCP upstreams)")
	}
	// The folder is the jail user's: what the server writes there is.
	if err := c.jailer.OwnWorkspace(dir); err != nil {
		return nil, err
	}
	return c.jailer.Wrap(cmd, sandbox.Jail{Workspace: dir, Programs: []string{prog}, Network: network, Limits: c.limits()})
}
