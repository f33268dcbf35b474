package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	sdkauth "github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/ratelimit"
	"github.com/toolgate/toolgate/internal/service"
)

// Handler serves Path and MetadataPath (and answers 404 elsewhere).
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case MetadataPath:
			s.metadata(w, r)
		case Path:
			s.serveMCP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}

// resource is the public URL of /mcp for r.
func (s *Server) resource(r *http.Request) string {
	if s.o.Resource != "" {
		return s.o.Resource
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + Path
}

// metadataURL is where the protected resource metadata of resource is
// (RFC 9728 §3.1: the well-known path inserted before the resource's path).
func metadataURL(resource string) string {
	u, err := url.Parse(resource)
	if err != nil {
		return ""
	}
	u.Path = "/.well-known/oauth-protected-resource" + u.Path
	u.RawPath = ""
	return u.String()
}

// metadata serves RFC 9728 protected resource metadata: the resource
// (/mcp), the authorization servers whose tokens it accepts, and that
// tokens go in the Authorization header only.
func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	sdkauth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:               s.resource(r),
		AuthorizationServers:   s.o.AuthorizationServers,
		BearerMethodsSupported: []string{"header"},
		ResourceName:           "Toolgate MCP gateway",
	}).ServeHTTP(w, r)
}

// serveMCP checks, in order: the Origin, the credential, the body
// (size, JSON, Mcp-Method and Mcp-Name against it), then hands the
// request to the SDK's streamable handler of its revision.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	if !s.hostAllowed(r) {
		s.o.Logger.Info("mcp: foreign Host on a loopback connection refused", "host", r.Host, "remote", r.RemoteAddr)
		writeRPCError(w, http.StatusForbidden, nil, -32003, "Host not allowed")
		return
	}
	if !s.originAllowed(r) {
		s.o.Logger.Info("mcp: foreign origin refused", "origin", r.Header.Get("Origin"), "remote", r.RemoteAddr)
		writeRPCError(w, http.StatusForbidden, nil, -32003, "Origin not allowed")
		return
	}
	res := s.resource(r)
	sdkauth.RequireBearerToken(s.verify, &sdkauth.RequireBearerTokenOptions{
		ResourceMetadataURL: metadataURL(res),
		// The authenticator enforces exp (API keys have none).
		AllowMissingExpiration: true,
	})(http.HandlerFunc(s.serveAuthenticated)).ServeHTTP(w, r)
}

func (s *Server) serveAuthenticated(w http.ResponseWriter, r *http.Request) {
	r.Header.Del(requestIDHeader)
	if s.tenant.Rate > 0 {
		// As REST: the gateway protects itself before it reads the body;
		// counted and logged at debug level, never audited.
		if ti := sdkauth.TokenInfoFromContext(r.Context()); ti != nil {
			id, _ := ti.Extra[identityKeyName].(*identity.Identity)
			if id != nil {
				v, _ := s.o.TenantBuckets.Take(r.Context(), id.Tenant, []ratelimit.Limit{s.tenant})
				if !v.OK {
					s.o.Metrics.RateLimited.WithLabelValues(service.LimitTenantRate).Inc()
					s.o.Logger.Debug("tenant rate limited", "tenant", id.Tenant, "path", r.URL.Path, "retry_after", v.RetryAfter)
					w.Header().Set("Retry-After", strconv.FormatInt(ratelimit.RetrySeconds(v.RetryAfter), 10))
					writeRPCError(w, http.StatusTooManyRequests, nil, service.KindRateLimited.JSONRPCCode(),
						"too many requests for this tenant (limits.tenant_rate); the request was not read; retry after the Retry-After delay")
					return
				}
			}
		}
	}
	if r.Method == http.MethodPost {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.o.MaxBodyBytes))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				writeRPCError(w, http.StatusRequestEntityTooLarge, nil, jsonrpc.CodeInvalidRequest,
					fmt.Sprintf("request body exceeds %d bytes", mbe.Limit))
				return
			}
			writeRPCError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "request body could not be read")
			return
		}
		id, status, code, msg := checkBody(r.Header, body)
		if status != 0 {
			writeRPCError(w, status, id, code, msg)
			return
		}
		if id != nil {
			r.Header.Set(requestIDHeader, auditableID(id))
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	if r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28" {
		s.stateless.ServeHTTP(w, r)
		return
	}
	s.stateful.ServeHTTP(w, r)
}

// maxRequestIDBytes bounds the JSON-RPC id an audit event records as it
// is; a longer one is recorded as its SHA-256, so an attacker-sized id
// cannot bloat the log and the event still names it.
const maxRequestIDBytes = 128

func auditableID(id json.RawMessage) string {
	if len(id) <= maxRequestIDBytes {
		return string(id)
	}
	sum := sha256.Sum256(id)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// codeHeaderMismatch is the SDK's JSON-RPC code for headers that
// disagree with the body (mcp.CodeHeaderMismatch).
const codeHeaderMismatch = mcp.CodeHeaderMismatch

// checkBody parses a POST body as one JSON-RPC message (or, for old
// revisions, a batch), and checks the Mcp-Method and Mcp-Name headers a
// client sent against it. It returns the message's id (its JSON text)
// and, when the request must be refused, an HTTP status, a JSON-RPC code
// and a message.
func checkBody(h http.Header, body []byte) (id json.RawMessage, status int, code int64, msg string) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if !json.Valid(body) || len(trimmed) == 0 {
		return nil, http.StatusBadRequest, jsonrpc.CodeParseError, "the body is not JSON"
	}
	method, name := h.Get("Mcp-Method"), h.Get("Mcp-Name")
	if trimmed[0] == '[' {
		if method != "" || name != "" {
			return nil, http.StatusBadRequest, codeHeaderMismatch, "Mcp-Method and Mcp-Name cannot describe a batch"
		}
		return nil, 0, 0, "" // the SDK refuses batches of revisions that have none
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if trimmed[0] != '{' || json.Unmarshal(body, &m) != nil {
		return nil, http.StatusBadRequest, jsonrpc.CodeInvalidRequest, "the body is not a JSON-RPC message"
	}
	if bytes.Equal(m.ID, []byte("null")) {
		m.ID = nil
	}
	if method != "" && method != m.Method {
		return m.ID, http.StatusBadRequest, codeHeaderMismatch, "the Mcp-Method header does not match the body's method"
	}
	if name != "" {
		var p struct {
			Name string `json:"name"`
			URI  string `json:"uri"`
		}
		_ = json.Unmarshal(m.Params, &p)
		bodyName := p.Name
		if m.Method == "resources/read" {
			bodyName = p.URI
		}
		if bodyName != name {
			return m.ID, http.StatusBadRequest, codeHeaderMismatch, "the Mcp-Name header does not match the body's name"
		}
	}
	if m.Method == "" {
		return nil, 0, 0, "" // a response or notification of the client
	}
	return m.ID, 0, 0, ""
}

func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int64, msg string) {
	body := map[string]any{"jsonrpc": "2.0", "error": map[string]any{"code": code, "message": msg}}
	if id != nil {
		body["id"] = id
	} else {
		body["id"] = nil
	}
	b, _ := json.Marshal(body)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b)
}

// hostAllowed guards against DNS rebinding as the SDK's own check does
// (which is off: it would also refuse a reverse proxy on the same host):
// a request that arrived on a loopback address must name a loopback Host,
// or the host of the configured mcp.resource.
func (s *Server) hostAllowed(r *http.Request) bool {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil || !isLoopback(local.String()) || isLoopback(r.Host) {
		return true
	}
	if s.o.Resource != "" {
		if u, err := url.Parse(s.o.Resource); err == nil && strings.EqualFold(u.Host, r.Host) {
			return true
		}
	}
	return false
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = strings.Trim(addr, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// originAllowed: no Origin (a non-browser client), the gateway's own
// origin (the request's Host, or that of the configured resource), or a
// configured one.
func (s *Server) originAllowed(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	if s.o.Resource != "" {
		if ru, err := url.Parse(s.o.Resource); err == nil && strings.EqualFold(ru.Scheme+"://"+ru.Host, u.Scheme+"://"+u.Host) {
			return true
		}
	}
	for _, o := range s.o.AllowedOrigins {
		if strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true
		}
	}
	return false
}

// verify is the SDK middleware's token verifier: the REST API's
// authenticator, plus the audience rule. The identity rides in the
// TokenInfo; UserID binds a session to the principal that opened it.
func (s *Server) verify(_ context.Context, _ string, r *http.Request) (*sdkauth.TokenInfo, error) {
	id, err := s.o.Auth.Authenticate(r)
	reason := ""
	switch {
	case err != nil || id == nil:
		reason = "invalid"
		var ae *auth.Error
		if errors.As(err, &ae) {
			reason = string(ae.Reason)
		}
	case id.Method == "jwt" && s.o.JWTAudience == "":
		// Without auth.jwt.audience a JWT is not bound to this gateway.
		reason = "audience not configured"
	}
	if reason != "" {
		s.o.Metrics.Unauthenticated.WithLabelValues(reason).Inc()
		s.o.Logger.Info("unauthenticated request", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "reason", reason, "err", err)
		return nil, sdkauth.ErrInvalidToken
	}
	return &sdkauth.TokenInfo{UserID: userID(id), Extra: map[string]any{identityKeyName: id}}, nil
}

const identityKeyName = "toolgate.identity"

// userID names a principal unambiguously: a session opened by one is
// refused to every other (tenant, principal and credential kind).
func userID(id *identity.Identity) string {
	return fmt.Sprintf("%q %q %q", id.Method, id.Tenant, id.Principal)
}

// httpIdentity is the identity the HTTP layer verified for this request.
func httpIdentity(_ context.Context, req mcp.Request) (*identity.Identity, error) {
	if ex := req.GetExtra(); ex != nil && ex.TokenInfo != nil {
		if id, ok := ex.TokenInfo.Extra[identityKeyName].(*identity.Identity); ok && id != nil {
			return id, nil
		}
	}
	return nil, rpcError(errUnauthenticated)
}
