package gateway

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

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
			sh, err := shell.New(shell.Options{Confine: g.confine, Logger: g.log})
			if err != nil {
				return nil, err
			}
			g.closers = append(g.closers, sh.Close)
			g.confinement = sandbox.Probe()
			if g.confinement.Mechanism == sandbox.MechanismNone {
				g.log.Warn("commands run without OS confinement", "reason", g.confinement.Reason)
			}
			return sh.Tools(), nil
		},
	},
	{
		names: []string{"task-create", "task-update", "task-get", "task-list"},
		start: func(ctx context.Context, g *Gateway) ([]tools.Tool, error) {
			// Tasks live in the audit database, so a restart or another
			// replica sees them.
			var st interface {
				task.Store
				Close() error
			}
			var err error
			switch g.cfg.Audit.Driver {
			case "sqlite":
				st, err = task.OpenSQLite(ctx, g.cfg.Audit.DSN)
			case "postgres":
				st, err = task.OpenPostgres(ctx, g.cfg.Audit.DSN)
			default:
				err = fmt.Errorf("task tools need the sqlite or postgres audit driver")
			}
			if err != nil {
				return nil, err
			}
			g.closers = append(g.closers, st.Close)
			return task.Tools(st, task.Options{}), nil
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

// confine puts a command the shell tool is about to start under OS
// confinement: it may write only inside the workspace it runs in, and has
// no network. Where the kernel offers no confinement the command runs
// unconfined (reported by /readyz); any other failure refuses it.
func (g *Gateway) confine(cmd *exec.Cmd) error {
	ws := ""
	for _, t := range g.cfg.Tenants {
		if cmd.Dir == t.Workspace || strings.HasPrefix(cmd.Dir, t.Workspace+string(filepath.Separator)) {
			ws = t.Workspace
		}
	}
	if ws == "" {
		return fmt.Errorf("confine: the command's folder is in no workspace")
	}
	err := sandbox.Wrap(cmd, sandbox.Policy{WritableDirs: []string{ws}}, g.self)
	if errors.Is(err, sandbox.ErrUnavailable) {
		return nil
	}
	return err
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
