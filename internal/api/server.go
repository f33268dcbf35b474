// Package api is the REST front door of the gateway: routes, envelope
// decoding, authentication and role checks, status codes and error
// bodies. It knows no tool and no policy detail and reaches no store and
// no engine: every handler decodes its request, calls one of the
// application services of internal/service (the same ones the MCP front
// door calls), and writes what it returns. Every failure that is not a
// tool result is written by one function, writeError, from a
// *service.Error whose kind gives the status (service.Kind's table).
package api

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/metrics"
	"github.com/toolgate/toolgate/internal/ratelimit"
	"github.com/toolgate/toolgate/internal/service"
	"github.com/toolgate/toolgate/internal/telemetry"
)

// Authenticator verifies a request's bearer credential.
type Authenticator interface {
	Authenticate(r *http.Request) (*identity.Identity, error)
}

// keyStatuser is an Authenticator whose keys may still be loading (an
// identity provider's): /readyz reports its KeyStatus as checks.identity
// when it is not "".
type keyStatuser interface {
	KeyStatus() string
}

// Options wire a Server. Calls, Approvals, Policy, Audit and Health are
// required.
type Options struct {
	Calls        service.Calls
	Approvals    service.Approvals
	Policy       service.Policy
	Audit        service.Audit
	Health       service.Health
	Auth         Authenticator
	Metrics      *metrics.Metrics
	Gatherer     prometheus.Gatherer // for /metrics
	Logger       *slog.Logger
	MaxBodyBytes int64 // default 1 MiB
	// MaxBatchCalls bounds the calls of one batch (default
	// DefaultMaxBatchCalls).
	MaxBatchCalls int
	// Confinement, when set, is reported by /readyz: which OS confinement
	// commands run under (never claimed when not active).
	Confinement any
	// Workspaces, when set, is reported by /readyz: how the tenants'
	// workspace quotas are enforced, and whether a workspace shares the
	// audit database's filesystem (never failing readiness, never naming
	// a tenant or a path).
	Workspaces any
	// JWKS is the key set of the assertions sent to upstream tools, served
	// unauthenticated at GET /.well-known/jwks.json; nil serves no keys.
	JWKS []byte
	// TracerProvider records a server span per request (named after its
	// route) and an auth span; nil records none but still honours an
	// incoming traceparent (internal/telemetry).
	TracerProvider trace.TracerProvider
	// TenantRate and TenantBurst bound each tenant's authenticated
	// requests in this process (limits.tenant_rate, tenant_burst): a token
	// bucket checked right after authentication, before any body is read.
	// A TenantRate of 0 turns it off; a TenantBurst below 1 is the rate
	// rounded up.
	TenantRate  float64
	TenantBurst int
	// TenantBuckets, when set, holds the tenant buckets (shared with the
	// MCP front door, so that limits.tenant_rate is one rate per tenant
	// across both); nil: the server's own.
	TenantBuckets *ratelimit.Memory
	// Now is the clock of the tenant buckets (nil: time.Now).
	Now func() time.Time
	// MCP, when set, is the MCP front door (internal/mcpserver), served at
	// /mcp and /.well-known/oauth-protected-resource/mcp; it
	// authenticates on its own (an MCP resource server's 401).
	MCP http.Handler
	// Console, when set, is the web console (internal/console), served at
	// /console and everything under it; it authenticates on its own
	// (session cookies, never bearer headers).
	Console http.Handler
}

// Server serves the v1 API.
type Server struct {
	o       Options
	tracer  trace.Tracer      // nil when TracerProvider is
	tenants *ratelimit.Memory // limits.tenant_rate buckets; nil when off
	tenant  ratelimit.Limit
}

// New returns a Server.
func New(o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = service.DefaultMaxBodyBytes
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New(nil)
	}
	if o.MaxBatchCalls <= 0 {
		o.MaxBatchCalls = DefaultMaxBatchCalls
	}
	// The services check roles and requests themselves; wrapping them
	// again is a no-op for the gateway's, and makes any other (a test's)
	// refuse what the real ones refuse.
	if o.Calls != nil {
		o.Calls, o.Approvals = service.CheckedCalls(o.Calls), service.CheckedApprovals(o.Approvals)
		o.Policy, o.Audit = service.CheckedPolicy(o.Policy), service.CheckedAudit(o.Audit)
	}
	s := &Server{o: o, tracer: telemetry.Tracer(o.TracerProvider, "github.com/toolgate/toolgate/internal/api")}
	if o.TenantRate > 0 {
		burst := float64(o.TenantBurst)
		if burst < 1 {
			burst = max(math.Ceil(o.TenantRate), 1)
		}
		s.tenant = ratelimit.Limit{Key: "tenant_rate", Rate: o.TenantRate, Burst: burst}
		s.tenants = o.TenantBuckets
		if s.tenants == nil {
			s.tenants = ratelimit.NewMemory(o.Now)
		}
	}
	return s
}

// Handler returns the routed handler.
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(telemetry.Middleware(s.o.TracerProvider), s.recoverer, s.instrument)
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, service.Errorf(service.KindNotFound, "no such route"))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, req *http.Request) {
		if allow := allowedMethods(r, req.URL.Path); allow != "" {
			w.Header().Set("Allow", allow) // RFC 9110 §15.5.6
		}
		writeError(w, service.Errorf(service.KindMethodNotAllowed, "method not allowed on this route"))
	})

	r.Get("/healthz", s.healthz)
	r.Get("/readyz", s.readyz)
	r.Get(upstreamv1.JWKSPath, s.jwks)
	if s.o.MCP != nil {
		r.Post("/mcp", s.o.MCP.ServeHTTP)
		r.Get("/mcp", s.o.MCP.ServeHTTP)    // a session's event stream
		r.Delete("/mcp", s.o.MCP.ServeHTTP) // ends a session
		r.Get("/.well-known/oauth-protected-resource/mcp", s.o.MCP.ServeHTTP)
	}
	if s.o.Console != nil {
		r.Mount("/console", s.o.Console)
	}
	if s.o.Gatherer != nil {
		r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.o.Gatherer, promhttp.HandlerOpts{}))
	}

	r.Route("/v1", func(r chi.Router) {
		r.Use(s.authenticate)
		r.Get("/tools", s.listTools)
		r.Post("/tools/{name}/calls", s.callTool)
		r.Post("/tools/{name}/decisions", s.decideTool)
		r.Post("/batches", s.callBatch)
		r.Post("/batches/decisions", s.decideBatch)
		r.Group(func(r chi.Router) {
			r.Use(requireRole(identity.RoleAuditor))
			r.Get("/audit/events", s.listEvents)
			r.Get("/audit/events/{id}", s.getEvent)
			r.Get("/audit/verify", s.verify)
			r.Post("/audit/verify", s.verifyCheckpoint)
			r.Get("/audit/checkpoint", s.checkpoint)
			r.Get("/audit/checkpoint/verifier", s.checkpointVerifier)
			r.Get("/audit/events/{id}/proof", s.eventProof)
			r.Get("/audit/consistency", s.consistency)
			r.Get("/audit/export", s.exportEvents)
		})
		r.Get("/calls/{call_id}", s.callStatus)
		r.Get("/questions", s.listQuestions)
		r.Post("/questions/{id}/answer", s.answerQuestion)
		r.Group(func(r chi.Router) {
			r.Use(requireRole(identity.RoleApprover))
			r.Get("/approvals", s.listApprovals)
			r.Get("/approvals/{id}", s.getApproval)
			r.Post("/approvals/{id}/approve", s.approve)
			r.Post("/approvals/{id}/deny", s.deny)
		})
		r.Group(func(r chi.Router) {
			r.Use(requireRole(identity.RolePolicyAdmin))
			r.Get("/policy", s.policy)
			r.Post("/policy/eval", s.evalPolicy)
			r.Post("/policy/replay", s.replayPolicy)
		})
	})
	return r
}

// allowedMethods lists the methods routes answers on path, for the Allow
// header of a 405.
func allowedMethods(routes chi.Routes, path string) string {
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if routes.Match(chi.NewRouteContext(), m, path) {
			out = append(out, m)
		}
	}
	return strings.Join(out, ", ")
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz reports whether calls can be served: a policy revision is loaded,
// the audit store can commit (it answers, and its last commit, or a probe
// write while commits fail, succeeded) and, with an identity provider
// configured, its keys have loaded. It reveals no tenant data and no error
// detail: the reason is one of a few fixed words, the error goes to the
// log.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	checks := s.o.Health.Check(ctx)
	if ks, ok := s.o.Auth.(keyStatuser); ok {
		if st := ks.KeyStatus(); st != "" {
			checks["identity"] = st
		}
	}
	status, code := "ready", http.StatusOK
	for _, v := range checks {
		if v != "ok" {
			status, code = "not ready", http.StatusServiceUnavailable
		}
	}
	body := map[string]any{"status": status, "checks": checks}
	if s.o.Confinement != nil {
		body["confinement"] = s.o.Confinement
	}
	if s.o.Workspaces != nil {
		body["workspaces"] = s.o.Workspaces
	}
	writeJSON(w, code, body)
}

// jwks serves the public keys upstream services verify assertions with.
// Public keys only, so no authentication; short caching lets services
// pick up a rotated key quickly.
func (s *Server) jwks(w http.ResponseWriter, _ *http.Request) {
	body := s.o.JWKS
	if body == nil {
		body = []byte(`{"keys":[]}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}
