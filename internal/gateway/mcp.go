package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/internal/assertion"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/tools/mcptool"
)

// mcpUpstream is one started MCP upstream and its refresh interval.
type mcpUpstream struct {
	u       *mcptool.Upstream
	refresh time.Duration
}

// driftRecorder writes the definition events of MCP tools not offered: one
// per tenant (every tenant's auditors see what was withheld from them),
// and counts them. Drifts found before the audit log opens wait for it.
type driftRecorder struct {
	mu      sync.Mutex
	log     *audit.Log
	pending []mcptool.Drift
	tenants []string
	counter *prometheus.CounterVec
	g       *Gateway
}

func (r *driftRecorder) record(d mcptool.Drift) {
	r.counter.WithLabelValues(d.Upstream, d.Kind).Inc()
	r.mu.Lock()
	if r.log == nil {
		r.pending = append(r.pending, d)
		r.mu.Unlock()
		return
	}
	log := r.log
	r.mu.Unlock()
	r.write(log, d)
}

// attach writes what waited and every later drift to log.
func (r *driftRecorder) attach(log *audit.Log) {
	r.mu.Lock()
	r.log = log
	pending := r.pending
	r.pending = nil
	r.mu.Unlock()
	for _, d := range pending {
		r.write(log, d)
	}
}

func (r *driftRecorder) write(log *audit.Log, d mcptool.Drift) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tenant := range r.tenants {
		ev := &audit.Event{
			Tenant: tenant, Tool: d.GatewayTool, Action: "mcp.definition",
			Phase: audit.PhaseDefinition, Outcome: d.Kind, Reasons: []string{d.Detail},
			Input: map[string]any{
				"upstream": d.Upstream, "tool": d.Tool, "gateway_tool": d.GatewayTool,
				"pinned_digest": d.PinnedDigest, "current_digest": d.CurrentDigest,
			},
			DurationsUS: map[string]int64{},
		}
		if !tools.ValidName(d.GatewayTool) {
			ev.Tool = ""
		}
		if err := log.Append(ctx, ev); err != nil {
			r.g.log.Error("could not audit an MCP definition drift", "tenant", tenant, "upstream", d.Upstream, "tool", d.Tool, "err", err)
		}
	}
}

// addMCPTools connects to every MCP upstream (tools.mcp), registers the
// tools each offers after everything else, and keeps the upstreams for
// refreshing. A pinned upstream that cannot be reached at start offers its
// pinned tools withheld until a refresh finds it (an unpinned one offers
// nothing, logged); a gateway tool name taken twice is a start error.
func (g *Gateway) addMCPTools(ctx context.Context, reg *tools.Registry, signer *assertion.Signer) error {
	if len(g.cfg.Tools.MCP) == 0 {
		return nil
	}
	if signer == nil {
		return &config.Error{File: g.cfg.File, Key: "auth.assertion.signing_key_file", Problem: "required when tools.mcp declares upstreams"}
	}
	lock, err := mcptool.ReadLock(g.cfg.MCPLockFile())
	if err != nil {
		return &config.Error{File: g.cfg.File, Key: "tools.mcp", Problem: "reading the pins: " + err.Error()}
	}
	g.drift = &driftRecorder{g: g, counter: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_mcp_definition_drift_total",
		Help: "MCP tool definitions not offered, by upstream and kind (drifted, unpinned, removed, invalid).",
	}, []string{"upstream", "kind"})}
	for t := range g.cfg.Tenants {
		g.drift.tenants = append(g.drift.tenants, t)
	}
	slices.Sort(g.drift.tenants)
	if err := g.registry.Register(g.drift.counter); err != nil {
		return err
	}
	builtin := map[string]bool{}
	for _, n := range BuiltinNames() {
		builtin[n] = true
	}
	for i, c := range g.cfg.Tools.MCP {
		key := fmt.Sprintf("tools.mcp[%d]", i)
		u, err := g.newMCPUpstream(c, lock, signer)
		if err != nil {
			return &config.Error{File: g.cfg.File, Key: key, Problem: err.Error()}
		}
		g.closers = append(g.closers, u.Close)
		dctx, cancel := context.WithTimeout(ctx, c.Timeout)
		ts, err := u.Discover(dctx)
		cancel()
		if err != nil {
			if !c.Pinned() || lock.Upstreams[c.Name] == nil {
				g.log.Error("MCP upstream unreachable at start: none of its tools is offered until a restart", "upstream", c.Name, "err", err)
				continue
			}
			// Its pinned tools exist, withheld until a refresh finds the
			// upstream offering exactly the pinned definitions.
			ts = u.OfferPinned(lock.Upstreams[c.Name].Tools, "the MCP upstream has not answered since the gateway started")
			g.log.Error("MCP upstream unreachable at start: its pinned tools are withheld until it answers", "upstream", c.Name, "tools", len(ts), "err", err)
		}
		for _, t := range ts {
			// Policies judge built-ins by name: an MCP tool must never be
			// mistaken for one, configured or not.
			if builtin[t.Spec().Name] {
				return &config.Error{File: g.cfg.File, Key: key + ".name", Problem: fmt.Sprintf("upstream tool %q becomes %q, the name of a built-in tool", t.Remote(), t.Spec().Name)}
			}
			if err := reg.Add(t); err != nil {
				return &config.Error{File: g.cfg.File, Key: key + ".name", Problem: fmt.Sprintf("upstream tool %q: %v", t.Remote(), err)}
			}
		}
		g.mcp = append(g.mcp, mcpUpstream{u: u, refresh: c.RefreshInterval})
		if err == nil {
			g.log.Info("MCP upstream connected", "upstream", c.Name, "tools", len(ts), "pinned", c.Pinned())
		}
	}
	return nil
}

// newMCPUpstream builds the client of one upstream from its config.
func (g *Gateway) newMCPUpstream(c config.MCPUpstream, lock *mcptool.Lock, signer *assertion.Signer) (*mcptool.Upstream, error) {
	o := mcptool.Options{
		Namespace: c.Name, URL: c.URL, Headers: c.Headers, Timeout: c.Timeout, MaxConcurrent: c.MaxConcurrent,
		MaxResponseBytes: c.MaxResponseBytes, Resources: c.Resources, Signer: signer, Logger: g.log,
		Pinned: c.Pinned(), Pins: lock.Pins(c.Name),
	}
	if g.drift != nil {
		o.OnDrift = g.drift.record
	}
	if g.engine != nil {
		ns := c.Name
		o.PolicyPins = func(ctx context.Context) map[string]string {
			rev, err := g.engine.Current()
			if err != nil {
				return nil
			}
			pins, err := rev.MCPPins(ctx)
			if err != nil {
				g.log.Warn("the policy's MCP pins are ignored", "err", err)
				return nil
			}
			return pins[ns]
		}
	}
	if te := c.TokenExchange; te != nil {
		// Read at start, never logged: a rotated secret takes a restart.
		secret, err := readClientSecret(te.ClientSecretFile)
		if err != nil {
			return nil, fmt.Errorf("token_exchange.client_secret_file: %w", err)
		}
		o.TokenExchange = &mcptool.TokenExchange{
			TokenURL: te.TokenURL, ClientID: te.ClientID, ClientSecret: secret,
			Audience: te.Audience, Resource: te.Resource, Scope: te.Scope, RequestedTokenType: te.RequestedTokenType,
		}
	}
	if c.Tools != nil {
		o.Allow = map[string]bool{}
		for _, t := range c.Tools {
			o.Allow[t] = true
		}
	}
	if len(c.Command) > 0 {
		prog, err := exec.LookPath(c.Command[0])
		if err != nil {
			return nil, fmt.Errorf("command: %v", err)
		}
		if prog, err = filepath.Abs(prog); err != nil {
			return nil, err
		}
		if prog == "/tmp" || strings.HasPrefix(prog, "/tmp/") {
			// The jail mounts a private, empty /tmp over the host's.
			return nil, fmt.Errorf("command: %s is under /tmp, which the command jail replaces with its own; install the server elsewhere", prog)
		}
		dir, err := os.MkdirTemp("", "toolgate-mcp-"+c.Name+"-")
		if err != nil {
			return nil, err
		}
		g.closers = append(g.closers, func() error { return os.RemoveAll(dir) })
		o.Command = append([]string{prog}, c.Command[1:]...)
		o.Dir = dir
		o.Confine = func(cmd *exec.Cmd) (func(), error) { return g.jail.wrapMCP(cmd, dir, prog, c.Network) }
	}
	return mcptool.New(o)
}

// readClientSecret reads a client secret file: its content without the
// trailing line break, which must be left and hold no control character
// (it travels in a form body).
func readClientSecret(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	secret := strings.TrimRight(string(b), "\r\n")
	if secret == "" {
		return "", fmt.Errorf("%s is empty", file)
	}
	for _, r := range secret {
		if r < ' ' || r == 0x7f {
			return "", fmt.Errorf("%s holds a control character", file)
		}
	}
	return secret, nil
}

// refreshMCP lists every upstream's tools again now.
func (g *Gateway) refreshMCP(ctx context.Context) {
	for _, m := range g.mcp {
		if err := m.u.Refresh(ctx); err != nil {
			g.log.Warn("MCP upstream refresh failed", "upstream", m.u.Namespace(), "err", err)
		}
	}
}

// PinReport is what PinMCP pinned.
type PinReport struct {
	File  string         // the lock file written
	Tools map[string]int // pinned tools by upstream
}

// PinMCP connects to every upstream of cfg.Tools.MCP, pins the definition
// of each tool it lists (within its allow-list) and writes mcp.lock.json
// beside the config, replacing the pins of those upstreams. Tools whose
// definition cannot be offered (an invalid schema, a name listed twice or
// colliding once normalized) are not pinned; they are returned in skipped.
// Any upstream that cannot be reached fails the whole run and writes
// nothing.
func PinMCP(ctx context.Context, cfg *config.Config, log *slog.Logger) (PinReport, []string, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{cfg: cfg, log: log}
	defer g.Close()
	var err error
	if g.self, err = locateHelper(cfg.Sandbox.Helper); err != nil {
		return PinReport{}, nil, err
	}
	g.jail = &commandJail{cfg: cfg, log: log, self: g.self}
	g.closers = append(g.closers, g.jail.Close)
	signer, err := g.loadAssertionSigner()
	if err != nil {
		return PinReport{}, nil, err
	}
	if signer == nil {
		return PinReport{}, nil, &config.Error{File: cfg.File, Key: "auth.assertion.signing_key_file", Problem: "required when tools.mcp declares upstreams"}
	}
	lock, err := mcptool.ReadLock(cfg.MCPLockFile())
	if err != nil {
		return PinReport{}, nil, err
	}
	rep := PinReport{File: cfg.MCPLockFile(), Tools: map[string]int{}}
	var skipped []string
	for i, c := range cfg.Tools.MCP {
		u, err := g.newMCPUpstream(c, &mcptool.Lock{Upstreams: map[string]*mcptool.LockUpstream{}}, signer)
		if err != nil {
			return PinReport{}, nil, &config.Error{File: cfg.File, Key: fmt.Sprintf("tools.mcp[%d]", i), Problem: err.Error()}
		}
		g.closers = append(g.closers, u.Close)
		lctx, cancel := context.WithTimeout(ctx, c.Timeout)
		defs, bad, err := u.List(lctx)
		cancel()
		if err != nil {
			return PinReport{}, nil, fmt.Errorf("tools.mcp[%d] (%s): %w", i, c.Name, err)
		}
		count := map[string]int{}
		norm := map[string]int{}
		for _, d := range defs {
			count[d.Name]++
			norm[mcptool.Normalize(c.Name, d.Name)]++
		}
		var keep []mcptool.Definition
		for _, d := range defs {
			if c.Tools != nil && !slices.Contains(c.Tools, d.Name) {
				continue
			}
			gw := mcptool.Normalize(c.Name, d.Name)
			switch {
			case bad[d.Name] != nil:
				skipped = append(skipped, fmt.Sprintf("%s/%s: %v", c.Name, d.Name, bad[d.Name]))
			case count[d.Name] > 1:
				skipped = append(skipped, fmt.Sprintf("%s/%s: listed more than once", c.Name, d.Name))
			case !tools.ValidName(gw) || norm[gw] > 1:
				skipped = append(skipped, fmt.Sprintf("%s/%s: does not make a unique valid gateway tool name", c.Name, d.Name))
			default:
				if err := mcptool.CheckDefinition(gw, d); err != nil {
					skipped = append(skipped, fmt.Sprintf("%s/%s: %v", c.Name, d.Name, err))
					continue
				}
				keep = append(keep, d)
			}
		}
		lock.Set(c.Name, keep)
		rep.Tools[c.Name] = len(keep)
	}
	lock.Version = mcptool.LockVersion
	if err := lock.Write(rep.File); err != nil {
		return PinReport{}, nil, err
	}
	return rep, skipped, nil
}
