package gateway

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/sandbox"
	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/tools/ask"
	"github.com/toolgate/toolgate/internal/tools/fetch"
	"github.com/toolgate/toolgate/internal/tools/shell"
	"github.com/toolgate/toolgate/internal/tools/skill"
	"github.com/toolgate/toolgate/internal/tools/task"
	"github.com/toolgate/toolgate/internal/tools/workspace"
)

// family is a group of built-in tools that share state (a store, a
// process supervisor). It is only started when one of its tools is
// configured.
type family struct {
	names []string
	start func(ctx context.Context, g *Gateway) ([]tools.Tool, error)
}

var families = []family{
	{
		names: []string{"read-file", "write-file", "edit-file", "glob", "grep"},
		start: func(context.Context, *Gateway) ([]tools.Tool, error) { return workspace.Tools(), nil },
	},
	{
		names: []string{"fetch"},
		start: func(context.Context, *Gateway) ([]tools.Tool, error) {
			return []tools.Tool{fetch.New(fetch.Options{})}, nil
		},
	},
	{
		names: []string{"bash", "process-output", "process-input", "process-stop"},
		start: func(_ context.Context, g *Gateway) ([]tools.Tool, error) {
			withheld := g.startJail()
			opts := shell.Options{Runner: g.commandRunner(), Logger: g.log, Withheld: withheld}
			sh, err := shell.New(opts)
			if err != nil {
				return nil, err
			}
			g.closers = append(g.closers, sh.Close)
			return sh.Tools(), nil
		},
	},
	{
		names: []string{"task-create", "task-update", "task-get", "task-list"},
		start: func(_ context.Context, g *Gateway) ([]tools.Tool, error) {
			// Tasks live in the gateway's database, so a restart or
			// another replica sees them.
			return task.Tools(g.db.Tasks(), task.Options{}), nil
		},
	},
	{
		names: []string{"skill"},
		start: func(_ context.Context, g *Gateway) ([]tools.Tool, error) {
			libs := map[string]*skill.Library{}
			for name, t := range g.cfg.Tenants {
				if t.Skills == "" {
					continue
				}
				lib, err := skill.Open(t.Skills)
				if err != nil {
					return nil, fmt.Errorf("tenants.%s.skills: %w", name, err)
				}
				g.closers = append(g.closers, lib.Close)
				libs[name] = lib
			}
			return []tools.Tool{skill.New(libs)}, nil
		},
	},
	{
		// Questions live with the held calls in the approval store, which
		// the pipeline owns; the tool itself keeps no state.
		names: []string{ask.Name},
		start: func(context.Context, *Gateway) ([]tools.Tool, error) { return []tools.Tool{ask.New()}, nil },
	},
}

// helperName says which binary builds the jails, without its path.
func (g *Gateway) helperName() string {
	if filepath.Base(g.self) == HelperName {
		return HelperName
	}
	return "gateway"
}

// startJail prepares the confinement of commands in the configured mode
// and returns why commands must be withheld ("" when they can run). In
// jail mode a kernel that cannot build the jail withholds them (fail
// closed); landlock-only (development only) withholds them only where
// Landlock is missing.
func (g *Gateway) startJail() string {
	sb := g.cfg.Sandbox
	if sb.Mode == sandbox.ModeLandlockOnly {
		st := sandbox.Probe()
		g.jailStatus = sandbox.JailStatus{Mode: sandbox.ModeLandlockOnly, Ready: st.Mechanism == sandbox.MechanismLandlock, Reason: st.Reason, Helper: g.helperName()}
		if g.jailStatus.Ready {
			g.jailStatus.Mechanisms = []string{sandbox.MechanismLandlock}
			if st.Network {
				g.jailStatus.Mechanisms = append(g.jailStatus.Mechanisms, sandbox.MechanismSeccomp)
			}
			g.log.Warn("sandbox.mode is landlock-only: commands can read the whole host (development only)")
			return ""
		}
		g.log.Error("commands withheld: no Landlock", "reason", st.Reason)
		return "commands withheld: " + st.Reason
	}
	j, st, err := sandbox.NewJailer(sandbox.JailerOptions{Self: g.self, UID: sb.UID, GID: sb.GID, NoCgroup: !sb.MemoryCgroup})
	st.Helper = g.helperName()
	g.jailStatus = st
	if err != nil {
		g.log.Error("commands withheld: the kernel cannot build the command jail", "reason", st.Reason)
		return "commands withheld: " + st.Reason
	}
	// Files a jail creates are the jail user's on the host; the tenants'
	// workspaces must be that user's for a jail to write in them.
	for name, t := range g.cfg.Tenants {
		if err := j.OwnWorkspace(t.Workspace); err != nil {
			j.Close()
			g.jailStatus = sandbox.JailStatus{Mode: sandbox.ModeJail, Reason: "cannot give the jail's user the workspace of tenant " + name}
			g.log.Error("commands withheld: cannot give the jail's user a workspace", "tenant", name, "err", err)
			return "commands withheld: " + g.jailStatus.Reason
		}
	}
	// And what the file tools create there is theirs too.
	uid, gid := j.UID()
	for _, ws := range g.workspaces {
		ws.SetOwner(uid, gid)
	}
	g.jailer = j
	g.closers = append(g.closers, j.Close)
	return ""
}

// commandRunner is how the shell tool's commands run: the whole command —
// interpreter, redirections, globs, builtins and every program — in a jail
// built from the call's decision, or in landlock-only mode under the older
// confinement. A workspace that is no tenant's is refused.
func (g *Gateway) commandRunner() shell.Runner {
	allow := func(ws string) error {
		for _, t := range g.cfg.Tenants {
			if ws == t.Workspace {
				return nil
			}
		}
		return errors.New("confine: the command's workspace is no tenant's")
	}
	if g.jailer == nil {
		if g.cfg.Sandbox.Mode == sandbox.ModeLandlockOnly {
			return shell.LandlockRunner{Self: g.self, Allow: allow}
		}
		return nil
	}
	sb := g.cfg.Sandbox
	return shell.JailRunner{
		Jailer: g.jailer,
		Limits: sandbox.Limits{MemoryBytes: sb.MemoryBytes, MaxProcesses: sb.MaxProcesses, CPUSeconds: sb.CPUSeconds,
			FileSizeBytes: sb.FileSizeBytes, OpenFiles: sb.OpenFiles},
		Allow:     allow,
		CPUWeight: g.cfg.CPUWeight,
	}
}

// BuiltinNames lists every built-in tool this build offers.
func BuiltinNames() []string {
	var out []string
	for _, f := range families {
		out = append(out, f.names...)
	}
	return out
}

// buildRegistry starts the families the configuration uses and registers
// the configured tools in declaration order.
func (g *Gateway) buildRegistry(ctx context.Context) (*tools.Registry, error) {
	want := map[string]int{}
	for i, name := range g.cfg.Tools.Builtin {
		want[name] = i
	}
	have := map[string]tools.Tool{}
	for _, f := range families {
		used := false
		for _, n := range f.names {
			if _, ok := want[n]; ok {
				used = true
			}
		}
		if !used {
			continue
		}
		ts, err := f.start(ctx, g)
		if err != nil {
			return nil, &config.Error{File: g.cfg.File, Key: fmt.Sprintf("tools.builtin[%d]", want[f.names[0]]), Problem: err.Error()}
		}
		for _, t := range ts {
			have[t.Spec().Name] = t
		}
	}
	reg, _ := tools.NewRegistry()
	for i, name := range g.cfg.Tools.Builtin {
		t, ok := have[name]
		if !ok {
			return nil, &config.Error{File: g.cfg.File, Key: fmt.Sprintf("tools.builtin[%d]", i), Problem: fmt.Sprintf("unknown built-in tool %q", name)}
		}
		if err := reg.Add(t); err != nil {
			return nil, &config.Error{File: g.cfg.File, Key: fmt.Sprintf("tools.builtin[%d]", i), Problem: err.Error()}
		}
	}
	return reg, nil
}
