// Package gateway assembles a running Toolgate from a loaded configuration:
// stores, policy engine, tools, pipeline and HTTP server. It is the
// composition root that cmd/gateway and the end-to-end tests share.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/toolgate/toolgate/internal/api"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/console"
	"github.com/toolgate/toolgate/internal/decision"
	"github.com/toolgate/toolgate/internal/invoke"
	"github.com/toolgate/toolgate/internal/lifecycle"
	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/metrics"
	"github.com/toolgate/toolgate/internal/pipeline"
	"github.com/toolgate/toolgate/internal/prepare"
	"github.com/toolgate/toolgate/internal/ratelimit"
	"github.com/toolgate/toolgate/internal/service"
	"github.com/toolgate/toolgate/internal/service/backend"
	"github.com/toolgate/toolgate/internal/store"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/internal/tlog"
	"github.com/toolgate/toolgate/internal/tools"
)

// Gateway is an assembled, not yet serving, gateway.
type Gateway struct {
	cfg        *config.Config
	log        *slog.Logger
	now        func() time.Time // the clock (WithClock)
	engine     *decision.Engine
	db         *store.DB // the one database: audit, approvals, tasks
	audit      *audit.Log
	workspaces []*tools.Workspace
	closers    []func() error // tool families' stores and supervisors
	self       string         // this binary, re-executed as the confinement helper
	closeOnce  sync.Once
	closeErr   error
	jail       *commandJail // the confinement of commands and stdio MCP servers, built on first use
	handler    http.Handler
	registry   *prometheus.Registry
	pipeline   *pipeline.Pipeline
	services   service.Services // what every front door calls
	invoker    *invoke.Invoker  // runs every call; holds the command slots
	shadow     *pipeline.Shadow // nil without policy.shadow
	tracing    *telemetry.Tracing
	mcp        []mcpUpstream     // MCP upstreams, refreshed while serving
	drift      *driftRecorder    // nil without tools.mcp
	front      *mcpserver.Server // the MCP front door; nil with mcp.enabled: false
	console    *console.Server   // the web console; nil with console.enabled: false
	wsReport   workspacesReport  // the workspaces' quotas, for /readyz
}

// TracingShutdownTimeout bounds how long Close waits for the spans still
// queued to reach the collector.
const TracingShutdownTimeout = 5 * time.Second

// helperBinary locates this gateway binary, which can act as the
// confinement helper (`gateway sandbox-exec`). Tests replace it to prove
// that a jail that cannot start withholds the command tools.
var helperBinary = os.Executable

// HelperName is the dedicated confinement helper (cmd/toolgate-sandbox)
// looked for beside the gateway binary.
const HelperName = "toolgate-sandbox"

// locateHelper picks the confinement helper: sandbox.helper when set,
// else toolgate-sandbox beside the gateway binary, else the gateway
// binary itself (the same code, ~11 ms slower to start per program).
func locateHelper(configured string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	self, err := helperBinary()
	if err != nil {
		return "", err
	}
	sib := filepath.Join(filepath.Dir(self), HelperName)
	if fi, err := os.Stat(sib); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		return sib, nil
	}
	return self, nil
}

// Option changes how New assembles a gateway.
type Option func(*Gateway)

// WithClock makes now the gateway's clock: event times, credential
// expiry, held-call and question expiry, idempotency keys, rate-limit
// buckets, console sessions, retention and pruning cutoffs (default
// time.Now). Tests move it instead of sleeping.
func WithClock(now func() time.Time) Option { return func(g *Gateway) { g.now = now } }

// New assembles a gateway from cfg. Configuration problems found here
// (such as an unknown built-in tool) are *config.Error values.
func New(ctx context.Context, cfg *config.Config, log *slog.Logger, opts ...Option) (_ *Gateway, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Gateway{cfg: cfg, log: log, registry: prometheus.NewRegistry(), now: time.Now}
	for _, o := range opts {
		o(g)
	}
	if g.self, err = locateHelper(cfg.Sandbox.Helper); err != nil {
		return nil, fmt.Errorf("locating the gateway binary for the confinement helper: %w", err)
	}
	defer func() {
		if err != nil {
			g.Close() // release whatever was opened before the failure
		}
	}()
	g.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := metrics.New(g.registry)

	// Tracing: exported only when a collector is configured.
	g.tracing, err = telemetry.Open(ctx, telemetry.Options{Config: cfg.Telemetry, Logger: log})
	if err != nil {
		return nil, &config.Error{File: cfg.File, Key: "telemetry", Problem: err.Error()}
	}
	if g.tracing.Enabled() {
		log.Info("exporting traces", "endpoint", g.tracing.Endpoint(), "sample_ratio", cfg.Telemetry.SampleRatio)
	}

	// Credentials.
	if f := cfg.Auth.JWT.HS256SecretFile; f != "" {
		created, err := auth.EnsureHS256Secret(f)
		if err != nil {
			return nil, fmt.Errorf("auth.jwt.hs256_secret_file: %w", err)
		}
		if created {
			log.Info("created a development HS256 secret", "file", f)
		}
	}
	authn, err := auth.NewAuthenticator(cfg.AuthConfig(), auth.WithLogger(log), auth.WithClock(g.now))
	if err != nil {
		return nil, err
	}
	g.closers = append(g.closers, func() error { authn.Close(); return nil })

	// Tenants' workspaces, opened once.
	envs := map[string]*tools.Env{}
	for name, t := range cfg.Tenants {
		subvolume, err := prepareWorkspace(t)
		if err != nil {
			return nil, fmt.Errorf("tenants.%s: %w", name, err)
		}
		if subvolume {
			log.Info("created the workspace as a btrfs subvolume", "tenant", name, "workspace", t.Workspace)
		}
		ws, err := tools.OpenWorkspace(t.Workspace)
		if err != nil {
			return nil, fmt.Errorf("tenants.%s.workspace: %w", name, err)
		}
		g.workspaces = append(g.workspaces, ws)
		envs[name] = &tools.Env{Tenant: name, Workspace: ws}
	}
	g.startQuotas(envs)
	g.jail = &commandJail{cfg: cfg, log: log, self: g.self, workspaces: g.workspaces}
	g.closers = append(g.closers, g.jail.Close)

	// Policy: a folder or a bundle.
	bundleSrc, err := bundleOptions(cfg)
	if err != nil {
		return nil, err
	}
	g.engine = decision.NewEngine(decision.Options{
		Dir: cfg.Policy.Dir, Logger: log, Registerer: g.registry, Debounce: cfg.Policy.ReloadDebounce,
		Bundle:    bundleSrc,
		CacheSize: cfg.Policy.DecisionCache,
		Tests:     nonEmpty(cfg.Policy.Tests),
	})
	if err := g.engine.Load(ctx); err != nil {
		// Serve anyway, not ready, failing closed, until a reload fixes it.
		log.Error("policy did not load; every call fails closed until it does", "err", err)
	}

	if g.shadow, err = g.openShadow(ctx); err != nil {
		return nil, err
	}

	// The database, opened (and migrated) once: every repository comes
	// from it.
	g.db, err = OpenStore(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	g.checkAuditFilesystem()
	// Tools, in the order the configuration declares them (some families
	// keep state in the database).
	reg, err := g.buildRegistry(ctx)
	if err != nil {
		return nil, err
	}
	signer, err := g.loadAssertionSigner()
	if err != nil {
		return nil, err
	}
	if err := g.addUpstreamTools(reg, signer); err != nil {
		return nil, err
	}
	if err := g.addMCPTools(ctx, reg, signer); err != nil {
		return nil, err
	}
	var jwks []byte
	if signer != nil {
		jwks = signer.JWKS()
	}

	if cfg.Audit.Chain != "" {
		log.Warn("audit.chain is deprecated and ignored: the audit log is sequenced in the database, replicas need no value of their own; remove it",
			"chain", cfg.Audit.Chain)
	}
	// The checkpoint key: created on first start (mode 0600); replicas of
	// one database must share the file.
	ckey, err := tlog.LoadOrCreateSigner(cfg.Audit.SigningKeyFile, tlog.KeyName)
	if err != nil {
		return nil, &config.Error{File: cfg.File, Key: "audit.signing_key_file", Problem: err.Error()}
	}
	g.audit, err = audit.NewLog(g.db.Audit(), audit.LogOptions{
		QueueSize: cfg.Audit.QueueSize, MaxBatch: cfg.Audit.MaxBatch,
		Signer: ckey, CheckpointInterval: cfg.Audit.CheckpointInterval, CheckpointFile: cfg.Audit.CheckpointFile,
		Logger: log, Registerer: g.registry, Now: g.now,
	})
	if err != nil {
		return nil, err
	}
	if g.drift != nil {
		g.drift.attach(g.audit)
	}

	prep, err := prepare.New(reg, prepare.Options{MaxDepth: cfg.Limits.MaxArgDepth})
	if err != nil {
		return nil, err
	}
	inv := invoke.New(invoke.Options{
		DefaultTimeout: cfg.Limits.DefaultTimeout, MaxOutputBytes: cfg.Limits.MaxOutputBytes, Logger: log,
		TenantCommands: cfg.Limits.TenantCommands,
	})
	g.invoker = inv
	// The rate_limit obligation's buckets: on PostgreSQL the table every
	// replica shares, counted on the database's clock; on SQLite a map in
	// this process (what store.DB.Limiter would be), kept here on the
	// gateway's clock so that WithClock moves refills as it moves every
	// other expiry.
	var limiter ratelimit.Limiter = g.db.Limiter()
	if g.db.Driver() == store.SQLite {
		limiter = ratelimit.NewMemory(g.now)
	}
	pl := pipeline.New(pipeline.Options{
		Registry: reg, Envs: envs, Engine: pipeline.Engine(g.engine), Preparer: prep, Invoker: inv,
		Audit: g.audit, Metrics: m, Logger: log, TenantConcurrency: cfg.Limits.TenantConcurrency,
		Approvals: g.db.Approvals(), ApprovalTTL: cfg.Approvals.TTL, Shadow: g.shadow,
		QuestionTTL: cfg.Approvals.QuestionTTL, TracerProvider: g.tracing.Provider(),
		Keys: g.db.Idempotency(), KeyTTL: cfg.Limits.IdempotencyTTL,
		KeyLease: keyLease(reg, cfg.Limits.DefaultTimeout),
		Limiter:  limiter, MaxPending: cfg.Approvals.MaxPending, MaxTenantPolls: cfg.Limits.TenantLongPolls,
		Now: g.now,
	})
	g.pipeline = pl
	g.services = service.Services{
		Calls:     backend.NewCalls(pl),
		Approvals: backend.NewApprovals(pl),
		Policy:    backend.NewPolicy(backend.PolicyOptions{Engine: g.engine, Pipeline: pl, Audit: g.audit, Logger: log}),
		Audit:     backend.NewAudit(backend.AuditOptions{Log: g.audit, Prover: prover{g.audit}, Logger: log}),
		Health:    backend.NewHealth(pipeline.Engine(g.engine), g.audit, log),
	}
	var mcpHandler http.Handler
	// One set of limits.tenant_rate buckets for both front doors.
	tenantBuckets := ratelimit.NewMemory(g.now)
	if cfg.MCP.On() {
		o, err := mcpOptions(cfg, g.services, authn, m, log, tenantBuckets)
		if err != nil {
			return nil, err
		}
		g.front = mcpserver.New(o)
		mcpHandler = g.front.Handler()
	}
	var consoleHandler http.Handler
	if cfg.Console.On() {
		var c *console.Server
		if c, err = newConsole(cfg, g.services, authn, log, m.FailClosed, g.now); err != nil {
			return nil, err
		}
		g.console = c
		consoleHandler = c.Handler()
	}
	g.handler = api.New(api.Options{
		Calls: g.services.Calls, Approvals: g.services.Approvals, Policy: g.services.Policy,
		Audit: g.services.Audit, Health: g.services.Health, Auth: authn, Metrics: m,
		Gatherer: g.registry, Logger: log, MaxBodyBytes: cfg.Limits.MaxBodyBytes, MaxBatchCalls: cfg.Limits.MaxBatchCalls,
		Confinement: g.jail.report(), Workspaces: g.workspacesReady(), JWKS: jwks,
		TracerProvider: g.tracing.Provider(),
		TenantRate:     cfg.Limits.TenantRate, TenantBurst: cfg.Limits.TenantBurst,
		MCP: mcpHandler, TenantBuckets: tenantBuckets, Console: consoleHandler, Now: g.now,
	}).Handler()
	return g, nil
}

// OpenStore opens the configured database (audit.driver, audit.dsn) and
// brings its schema up to date. opts add to what the configuration says
// (store.ReadOnly for offline readers).
func OpenStore(ctx context.Context, cfg *config.Config, log *slog.Logger, opts ...store.Option) (*store.DB, error) {
	db, err := store.Open(ctx, cfg.Audit.Driver, cfg.Audit.DSN, append([]store.Option{store.WithLogger(log)}, opts...)...)
	if errors.Is(err, store.ErrUnknownDriver) {
		return nil, &config.Error{File: cfg.File, Key: "audit.driver", Problem: fmt.Sprintf("driver %q is not available in this build", cfg.Audit.Driver)}
	}
	return db, err
}

// Services is the application layer every front door calls (REST and
// MCP): the same concrete services both handlers use.
func (g *Gateway) Services() service.Services { return g.services }

// MCPServer is the MCP front door (nil when mcp.enabled is false): served
// at /mcp by Handler, and over stdio by `gateway mcp stdio`.
func (g *Gateway) MCPServer() *mcpserver.Server { return g.front }

// Handler is the gateway's HTTP handler.
func (g *Gateway) Handler() http.Handler { return g.handler }

// Serve serves on ln until ctx ends, then shuts down gracefully: requests
// in flight finish, then the audit log drains.
func (g *Gateway) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           g.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
	// Long polls (GET /v1/calls/{id}?wait=) answer at once on shutdown
	// instead of holding it.
	srv.RegisterOnShutdown(g.pipeline.StopWaiting)
	stopBackground, err := g.background(ctx)
	if err != nil {
		return err
	}
	defer stopBackground()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	g.log.Info("gateway listening", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	<-errc
	return err
}

// background starts what runs beside a front door while the gateway
// serves (policy watchers, retention, approval expiry, key pruning, MCP
// upstream refreshes, pprof) as runners of one group; the returned
// function stops all of it and waits, so that nothing runs on once the
// front door has stopped and Close closes what the runners use.
func (g *Gateway) background(ctx context.Context) (func(), error) {
	runners, err := g.runners()
	if err != nil {
		return nil, err
	}
	return lifecycle.Start(ctx, g.log, runners...).Stop, nil
}

// runners lists the gateway's background work for its configuration.
func (g *Gateway) runners() ([]lifecycle.Runner, error) {
	var rs []lifecycle.Runner
	if g.cfg.Policy.WatchEnabled() {
		rs = append(rs, lifecycle.Runner{Name: "policy watcher", Run: g.engine.Watch})
		if g.shadow != nil {
			rs = append(rs, lifecycle.Runner{Name: "shadow policy watcher", Run: g.shadow.Engine().Watch})
		}
	}
	if r := g.cfg.Audit.Retention; r > 0 {
		rs = append(rs, g.audit.Retention(r))
	}
	rs = append(rs, g.pipeline.Runners(slices.Collect(maps.Keys(g.cfg.Tenants)))...)
	for _, m := range g.mcp {
		rs = append(rs, lifecycle.Runner{Name: "MCP upstream " + m.u.Namespace() + " refresh", Run: func(ctx context.Context) error {
			m.u.Run(ctx, m.refresh)
			return nil
		}})
	}
	if addr := g.cfg.Debug.PprofListen; addr != "" {
		r, err := g.pprofRunner(addr)
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// ServeStdio serves one local MCP client over in and out (`gateway mcp
// stdio`) as the holder of token, until the client hangs up or ctx ends,
// with the same background work as Serve.
func (g *Gateway) ServeStdio(ctx context.Context, token string, in io.ReadCloser, out io.WriteCloser) error {
	if g.front == nil {
		return &config.Error{File: g.cfg.File, Key: "mcp.enabled", Problem: "is false: the MCP front door is off"}
	}
	stopBackground, err := g.background(ctx)
	if err != nil {
		return err
	}
	defer stopBackground()
	defer g.pipeline.StopWaiting()
	return g.front.ServeStdio(ctx, token, in, out)
}

// Close releases the stores and workspaces. The audit log drains first.
func (g *Gateway) Close() error {
	g.closeOnce.Do(func() { g.closeErr = g.close() })
	return g.closeErr
}

func (g *Gateway) close() error {
	var errs []error
	if g.pipeline != nil {
		g.pipeline.Close()
	}
	if g.tracing != nil {
		// Requests are done: send the spans still queued, within a bound.
		ctx, cancel := context.WithTimeout(context.Background(), TracingShutdownTimeout)
		if err := g.tracing.Shutdown(ctx); err != nil {
			g.log.Warn("traces not flushed at shutdown", "err", err)
		}
		cancel()
	}
	for i := len(g.closers) - 1; i >= 0; i-- {
		errs = append(errs, g.closers[i]())
	}
	if g.audit != nil {
		errs = append(errs, g.audit.Close())
	}
	if g.db != nil {
		errs = append(errs, g.db.Close())
	}
	for _, ws := range g.workspaces {
		errs = append(errs, ws.Close())
	}
	return errors.Join(errs...)
}

// seedWorkspace creates a missing workspace from its seed folder.
func seedWorkspace(t config.Tenant) error {
	if t.Seed == "" {
		return nil
	}
	if _, err := os.Stat(t.Workspace); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(t.Workspace), 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(t.Workspace), ".seed-")
	if err != nil {
		return err
	}
	if err := os.CopyFS(tmp, os.DirFS(t.Seed)); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	return os.Rename(tmp, t.Workspace)
}

// nonEmpty is []string{s}, or nil for "".
func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
