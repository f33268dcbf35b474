// Package mcpserver is the MCP front door of the gateway: the Model
// Context Protocol over streamable HTTP at /mcp (and over stdio for local
// clients), built on the official Go SDK's server. Like the REST front
// door (internal/api) it knows no tool and no policy detail and reaches
// no store and no engine: tools/list and tools/call call service.Calls,
// the same service GET /v1/tools and POST /v1/tools/{name}/calls call,
// and render what it returns. An ask-user question goes to the caller's
// user through the client when it can elicit (ask.go): an input_required
// result for 2026-07-28, elicitation/create before; the answer is
// Approvals.Answer's.
//
// Authorization is that of an MCP resource server: the REST API's bearer
// credentials (verified by the same authenticator), a 401 that names the
// RFC 9728 protected resource metadata, tokens bound to this gateway
// (a JWT must carry the configured audience; see Options.JWTAudience),
// no token ever passed on, Origin validated, Mcp-Method and Mcp-Name
// headers checked against the body, and session ids (protocol revisions
// before 2026-07-28) random, bound to the principal that opened them and
// never a credential.
package mcpserver

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/metrics"
	"github.com/toolgate/toolgate/internal/ratelimit"
	"github.com/toolgate/toolgate/internal/service"
)

// Paths the front door serves.
const (
	Path         = "/mcp"
	MetadataPath = "/.well-known/oauth-protected-resource/mcp"
)

// Via is what the audit events of a call made through this front door
// record as "via".
const Via = "mcp"

// Authenticator verifies a request's bearer credential (*auth.Authenticator).
type Authenticator interface {
	Authenticate(r *http.Request) (*identity.Identity, error)
}

// Options wire a Server. Calls and Auth are required.
type Options struct {
	Calls service.Calls
	Auth  Authenticator
	// Questions (service.Approvals) lets an ask-user call put its
	// question to the caller's user through the client (elicitation);
	// nil: such calls answer awaiting_user, as over REST.
	Questions Questions
	// JWTAudience is auth.jwt.audience. The authenticator refuses a JWT
	// whose "aud" is not it; when it is "", no JWT can be bound to this
	// gateway and /mcp refuses every JWT (API keys, which only this
	// gateway knows, still work).
	JWTAudience string
	// AuthorizationServers are named by the protected resource metadata
	// (auth.jwt.oidc_issuer, or issuer when it is a URL).
	AuthorizationServers []string
	// Resource is the public URL of /mcp (mcp.resource); "" builds it from
	// each request's Host.
	Resource string
	// AllowedOrigins may call /mcp from a browser besides the gateway's
	// own origin (mcp.allowed_origins).
	AllowedOrigins []string
	// MaxBodyBytes bounds a POST body (limits.max_body_bytes; default 1 MiB).
	MaxBodyBytes int64
	Metrics      *metrics.Metrics
	Logger       *slog.Logger
	// Version is the server version announced to clients.
	Version string
	// TenantRate and TenantBurst are limits.tenant_rate and tenant_burst,
	// checked right after authentication, before the body is read, in
	// TenantBuckets (shared with the REST front door; nil: its own). A
	// TenantRate of 0 turns it off.
	TenantRate    float64
	TenantBurst   int
	TenantBuckets *ratelimit.Memory
	// SessionTimeout ends a session (revisions before 2026-07-28) that has
	// seen no request for this long (mcp.session_timeout; default
	// DefaultSessionTimeout), so abandoned sessions do not pile up.
	SessionTimeout time.Duration
	// StateKey seals the requestState of input_required results
	// (mcp.request_state_key_file; at least MinStateKeyBytes): front doors
	// with the same key, such as replicas sharing the file, open each
	// other's states. nil draws a random key when New runs, so only this
	// front door opens its states. New panics on a shorter key.
	StateKey []byte
	// PreviousStateKeys open states sealed before a rotation
	// (mcp.request_state_previous_key_files) but seal none.
	PreviousStateKeys [][]byte
}

// DefaultSessionTimeout is Options.SessionTimeout's default.
const DefaultSessionTimeout = 30 * time.Minute

// Server is the MCP front door.
type Server struct {
	o         Options
	tenant    ratelimit.Limit // limits.tenant_rate; Rate 0 when off
	stateful  http.Handler    // revisions with sessions (2025-11-25, 2025-06-18 and older)
	stateless http.Handler    // 2026-07-28 and later: no sessions
	states    stateSealer     // requestState of input_required results
}

// New returns the front door.
func New(o Options) *Server {
	if o.Calls != nil {
		o.Calls = service.CheckedCalls(o.Calls) // a no-op for the gateway's
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = service.DefaultMaxBodyBytes
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New(nil)
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	s := &Server{o: o, states: newStateSealer(o.StateKey, o.PreviousStateKeys...)}
	if o.TenantRate > 0 {
		burst := float64(o.TenantBurst)
		if burst < 1 {
			burst = max(math.Ceil(o.TenantRate), 1)
		}
		s.tenant = ratelimit.Limit{Key: "tenant_rate", Rate: o.TenantRate, Burst: burst}
		if s.o.TenantBuckets == nil {
			s.o.TenantBuckets = ratelimit.NewMemory(nil)
		}
	}
	srv := s.newMCPServer(httpIdentity, httpRequestID)
	get := func(*http.Request) *mcp.Server { return srv }
	s.stateful = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		Logger: o.Logger, MaxRequestBodyBytes: o.MaxBodyBytes, SessionTimeout: o.SessionTimeout,
		DisableLocalhostProtection: true, // hostAllowed, which knows mcp.resource
	})
	s.stateless = mcp.NewStreamableHTTPHandler(get, &mcp.StreamableHTTPOptions{
		Stateless: true, Logger: o.Logger, MaxRequestBodyBytes: o.MaxBodyBytes,
		PropagateRequestCancellation: true,
		DisableLocalhostProtection:   true,
	})
	return s
}

// identifyFunc is the verified caller of one MCP request.
type identifyFunc func(ctx context.Context, req mcp.Request) (*identity.Identity, error)

// requestIDFunc is the auditable JSON-RPC id of a tools/call, as its
// transport learned it ("" when it did not).
type requestIDFunc func(call *mcp.CallToolRequest) string

// newMCPServer is the SDK server whose tools/list and tools/call are
// answered by the Calls service for the identity identify returns.
func (s *Server) newMCPServer(identify identifyFunc, requestID requestIDFunc) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "toolgate", Version: orDefault(s.o.Version, "dev")}, &mcp.ServerOptions{
		// Tools only; no logging capability (nothing is logged to clients).
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "tools/list":
				id, err := identify(ctx, req)
				if err != nil {
					return nil, err
				}
				return s.listTools(ctx, id, sessionOf(req))
			case "tools/call":
				id, err := identify(ctx, req)
				if err != nil {
					return nil, err
				}
				call, ok := req.(*mcp.CallToolRequest)
				if !ok || call.Params == nil {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tools/call needs params"}
				}
				return s.callTool(ctx, id, call, requestID(call))
			}
			return next(ctx, method, req)
		}
	})
	return srv
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// sessionOf is the MCP session id ("" for sessionless revisions and
// stdio): the session_id the services, policy and audit see.
func sessionOf(req mcp.Request) string {
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
		return ss.ID()
	}
	return ""
}

// requestIDHeader carries the JSON-RPC id of a POST from the HTTP layer,
// which reads the body, to the tool handler (the SDK hands handlers the
// request's header, not its id). Whatever a client sends in it is
// dropped first.
const requestIDHeader = "Toolgate-Mcp-Request-Id"

func httpRequestID(call *mcp.CallToolRequest) string {
	if ex := call.GetExtra(); ex != nil && ex.Header != nil {
		return ex.Header.Get(requestIDHeader)
	}
	return ""
}

// rpcError renders a service failure as the JSON-RPC error of its kind
// (service.Kind's table): the safe message, and in data the REST error
// code, the call it belongs to and when to retry.
func rpcError(err error) error {
	e := service.As(err)
	data := map[string]any{"code": e.Kind.Code()}
	if e.CallID != "" {
		data["call_id"] = e.CallID
	}
	if e.DecisionID != "" {
		data["decision_id"] = e.DecisionID
	}
	if e.RetryAfter > 0 || e.Kind == service.KindRateLimited {
		secs := int64((e.RetryAfter + 999_999_999) / 1_000_000_000)
		if secs < 1 {
			secs = 1
		}
		data["retry_after_seconds"] = secs
	}
	raw, _ := marshal(data)
	return &jsonrpc.Error{Code: e.Kind.JSONRPCCode(), Message: e.Message, Data: raw}
}

// errUnauthenticated is every identity failure inside an MCP request
// (stdio: the token file's credential no longer verifies).
var errUnauthenticated = service.Errorf(service.KindUnauthenticated, "a valid bearer credential is required")
