package gateway

import (
	"context"
	"fmt"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/tools/ask"
	"github.com/toolgate/toolgate/internal/tools/fetch"
	"github.com/toolgate/toolgate/internal/tools/shell"
	"github.com/toolgate/toolgate/internal/tools/skill"
	"github.com/toolgate/toolgate/internal/tools/task"
	"github.com/toolgate/toolgate/internal/tools/workspace"
)

// module is what a tool family (built-in, upstream, MCP) provisions: its
// tools, and what the gateway closes, in reverse order, when it closes.
type module struct {
	tools   []tools.Tool
	closers []func() error
}

// family is a group of built-in tools that share state (a store, a
// process supervisor). It is only provisioned when one of its tools is
// configured.
type family struct {
	names     []string
	provision func(ctx context.Context, g *Gateway) (module, error)
}

var families = []family{
	{
		names: []string{"read-file", "write-file", "edit-file", "glob", "grep"},
		provision: func(context.Context, *Gateway) (module, error) {
			return module{tools: workspace.Tools()}, nil
		},
	},
	{
		names: []string{"fetch"},
		provision: func(context.Context, *Gateway) (module, error) {
			return module{tools: []tools.Tool{fetch.New(fetch.Options{})}}, nil
		},
	},
	{
		names: []string{"bash", "process-output", "process-input", "process-stop"},
		provision: func(_ context.Context, g *Gateway) (module, error) {
			withheld := g.jail.start()
			sh, err := shell.New(shell.Options{Runner: g.jail.runner(), Logger: g.log, Withheld: withheld})
			if err != nil {
				return module{}, err
			}
			return module{tools: sh.Tools(), closers: []func() error{sh.Close}}, nil
		},
	},
	{
		names: []string{"task-create", "task-update", "task-get", "task-list"},
		provision: func(_ context.Context, g *Gateway) (module, error) {
			// Tasks live in the gateway's database, so a restart or
			// another replica sees them.
			return module{tools: task.Tools(g.db.Tasks(), task.Options{})}, nil
		},
	},
	{
		names: []string{"skill"},
		provision: func(_ context.Context, g *Gateway) (module, error) {
			var m module
			libs := map[string]*skill.Library{}
			for name, t := range g.cfg.Tenants {
				if t.Skills == "" {
					continue
				}
				lib, err := skill.Open(t.Skills)
				if err != nil {
					m.close()
					return module{}, fmt.Errorf("tenants.%s.skills: %w", name, err)
				}
				m.closers = append(m.closers, lib.Close)
				libs[name] = lib
			}
			m.tools = []tools.Tool{skill.New(libs)}
			return m, nil
		},
	},
	{
		// Questions live with the held calls in the approval store, which
		// the pipeline owns; the tool itself keeps no state.
		names: []string{ask.Name},
		provision: func(context.Context, *Gateway) (module, error) {
			return module{tools: []tools.Tool{ask.New()}}, nil
		},
	},
}

// close closes what m holds (a module that failed half-way).
func (m module) close() {
	for i := len(m.closers) - 1; i >= 0; i-- {
		_ = m.closers[i]()
	}
}

// adopt takes m's closers: the gateway closes them at Close.
func (g *Gateway) adopt(m module) []tools.Tool {
	g.closers = append(g.closers, m.closers...)
	return m.tools
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
		m, err := f.provision(ctx, g)
		if err != nil {
			return nil, &config.Error{File: g.cfg.File, Key: fmt.Sprintf("tools.builtin[%d]", want[f.names[0]]), Problem: err.Error()}
		}
		for _, t := range g.adopt(m) {
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
