package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/jwks/jwkstest"
	"github.com/toolgate/toolgate/internal/service"
)

// oidcTestClock is a clock a test moves.
type oidcTestClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *oidcTestClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *oidcTestClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// oidcTestProvider serves discovery, keys and a token endpoint that
// answers every code with an ID token carrying the nonce the test set.
type oidcTestProvider struct {
	srv        *httptest.Server
	key        *jwkstest.Key
	clock      *oidcTestClock
	discovery  atomic.Int64
	down       atomic.Bool
	meta       map[string]any // discovery members replaced or added
	mu         sync.Mutex
	nonce, sub string
}

func newOIDCTestProvider(t *testing.T, clock *oidcTestClock, tlsServer bool, meta map[string]any) *oidcTestProvider {
	p := &oidcTestProvider{key: jwkstest.NewKey("k", "ES256"), clock: clock, meta: meta, sub: "alice"}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		p.discovery.Add(1)
		if p.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		doc := map[string]any{
			"issuer": p.srv.URL, "authorization_endpoint": p.srv.URL + "/authorize",
			"token_endpoint": p.srv.URL + "/token", "jwks_uri": p.srv.URL + "/keys",
			"id_token_signing_alg_values_supported": []string{"ES256"},
		}
		for k, v := range p.meta {
			doc[k] = v
		}
		json.NewEncoder(w).Encode(doc)
	})
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"keys": []any{p.key.JWK()}})
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, _ *http.Request) {
		now := p.clock.now()
		p.mu.Lock()
		nonce, sub := p.nonce, p.sub
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"token_type": "Bearer", "expires_in": 3600,
			"access_token": p.key.Sign(jwt.MapClaims{"iss": p.srv.URL, "sub": sub, "exp": now.Add(time.Hour).Unix()}),
			"id_token": p.key.Sign(jwt.MapClaims{"iss": p.srv.URL, "sub": sub, "aud": "console", "nonce": nonce,
				"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}),
		})
	})
	if tlsServer {
		p.srv = httptest.NewTLSServer(mux)
	} else {
		p.srv = httptest.NewServer(mux)
	}
	t.Cleanup(p.srv.Close)
	return p
}

// oidcTestAuth stands for the gateway's authenticator: it accepts any
// bearer JWT as acme/<sub> with an expiry the test sets.
type oidcTestAuth struct {
	mu      sync.Mutex
	expires time.Time
	sub     string
}

func (a *oidcTestAuth) Authenticate(r *http.Request) (*identity.Identity, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
		return nil, auth.ErrUnauthenticated
	}
	return &identity.Identity{Tenant: "acme", Principal: a.sub, Roles: []string{identity.RoleAuditor}, Method: "jwt", Expires: a.expires}, nil
}

func newOIDCTestServer(t *testing.T, p *oidcTestProvider, a *oidcTestAuth, clock *oidcTestClock, ttl, idle time.Duration) *Server {
	t.Helper()
	s, err := New(Options{
		Services: service.Services{
			Calls: service.CheckedCalls(nil), Approvals: service.CheckedApprovals(nil),
			Policy: struct{ service.Policy }{}, Audit: struct{ service.Audit }{},
		},
		Auth: a, SessionTTL: ttl, IdleTimeout: idle, Now: clock.now,
		OIDC: &OIDCOptions{Issuer: p.srv.URL, ClientID: "console", RedirectURL: "http://127.0.0.1:1/console/oidc/callback",
			HTTPClient: p.srv.Client()},
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// oidcTestSignIn starts a sign-in and returns the callback request the
// provider would send the browser to (with the binding cookie). The
// handlers are called directly, without the router (the gateway's tests
// cover the routes).
func oidcTestSignIn(t *testing.T, s *Server, p *oidcTestProvider) *http.Request {
	t.Helper()
	rec := httptest.NewRecorder()
	s.oidcLogin(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1:1/console/oidc/login", nil))
	if rec.Code != http.StatusFound {
		t.Fatalf("start: %d %s", rec.Code, rec.Body)
	}
	loc, _ := url.Parse(rec.Header().Get("Location"))
	p.mu.Lock()
	p.nonce = loc.Query().Get("nonce")
	p.mu.Unlock()
	req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1:1/console/oidc/callback?code=c&state="+url.QueryEscape(loc.Query().Get("state")), nil)
	for _, c := range rec.Result().Cookies() {
		req.AddCookie(c)
	}
	return req
}

func oidcTestCallback(s *Server, req *http.Request) (*httptest.ResponseRecorder, string) {
	rec := httptest.NewRecorder()
	s.oidcCallback(rec, req)
	for _, c := range rec.Result().Cookies() {
		if c.Name == cookieSession {
			return rec, c.Value
		}
	}
	return rec, ""
}

// A session opened with the identity provider ends when its access token
// expires, or at session_ttl if that comes first.
func TestOIDCSessionEndsNoLaterThanTheAccessToken(t *testing.T) {
	clock := &oidcTestClock{t: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)}
	p := newOIDCTestProvider(t, clock, false, nil)
	a := &oidcTestAuth{sub: "alice"}
	s := newOIDCTestServer(t, p, a, clock, 8*time.Hour, 24*time.Hour)

	// The credential expires in 20 minutes: so does the session.
	a.expires = clock.now().Add(20 * time.Minute)
	rec, cookie := oidcTestCallback(s, oidcTestSignIn(t, s, p))
	if rec.Code != http.StatusSeeOther || cookie == "" {
		t.Fatalf("callback: %d %s", rec.Code, rec.Body)
	}
	clock.add(19 * time.Minute)
	if s.sessions.get(cookie) == nil {
		t.Fatal("the session ended before its credential")
	}
	clock.add(time.Minute)
	if s.sessions.get(cookie) != nil {
		t.Fatal("the session outlived its credential")
	}

	// The credential outlives session_ttl: the session ends at the TTL.
	a.expires = clock.now().Add(48 * time.Hour)
	_, cookie = oidcTestCallback(s, oidcTestSignIn(t, s, p))
	for range 7 {
		clock.add(time.Hour)
		if s.sessions.get(cookie) == nil {
			t.Fatal("the session ended before session_ttl")
		}
	}
	clock.add(time.Hour)
	if s.sessions.get(cookie) != nil {
		t.Fatal("the session outlived session_ttl")
	}
}

// A sign-in left at the provider for more than ten minutes is refused.
func TestOIDCPendingSignInExpires(t *testing.T) {
	clock := &oidcTestClock{t: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)}
	p := newOIDCTestProvider(t, clock, false, nil)
	a := &oidcTestAuth{sub: "alice", expires: clock.now().Add(2 * time.Hour)}
	s := newOIDCTestServer(t, p, a, clock, 0, 0)

	req := oidcTestSignIn(t, s, p)
	clock.add(pendingTTL)
	rec, cookie := oidcTestCallback(s, req)
	if rec.Code != http.StatusBadRequest || cookie != "" || s.Sessions() != 0 {
		t.Fatalf("late callback: %d, cookie %q, %d sessions", rec.Code, cookie, s.Sessions())
	}
	// Just in time works.
	req = oidcTestSignIn(t, s, p)
	clock.add(pendingTTL - time.Second)
	if rec, cookie := oidcTestCallback(s, req); rec.Code != http.StatusSeeOther || cookie == "" {
		t.Fatalf("callback in time: %d %s", rec.Code, rec.Body)
	}
	if s.PendingSignIns() != 0 {
		t.Fatalf("%d pending sign-ins left", s.PendingSignIns())
	}
}

// Discovery is lazy and a failure is remembered for discoveryRetry: the
// provider is not asked again on every page load, and is once the time
// has passed.
func TestOIDCDiscoveryIsRetried(t *testing.T) {
	clock := &oidcTestClock{t: time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)}
	p := newOIDCTestProvider(t, clock, false, nil)
	p.down.Store(true)
	a := &oidcTestAuth{sub: "alice", expires: clock.now().Add(time.Hour)}
	s := newOIDCTestServer(t, p, a, clock, 0, 0)
	if n := p.discovery.Load(); n != 0 {
		t.Fatalf("New discovered the provider (%d requests): it must start without it", n)
	}
	start := func() int {
		rec := httptest.NewRecorder()
		s.oidcLogin(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1:1/console/oidc/login", nil))
		return rec.Code
	}
	if code := start(); code != http.StatusServiceUnavailable || p.discovery.Load() != 1 {
		t.Fatalf("provider down: %d after %d discoveries", code, p.discovery.Load())
	}
	p.down.Store(false)
	clock.add(discoveryRetry - time.Second)
	if code := start(); code != http.StatusServiceUnavailable || p.discovery.Load() != 1 {
		t.Fatalf("within the retry interval: %d after %d discoveries", code, p.discovery.Load())
	}
	clock.add(time.Second)
	if code := start(); code != http.StatusFound || p.discovery.Load() != 2 {
		t.Fatalf("after the retry interval: %d after %d discoveries", code, p.discovery.Load())
	}
	// Discovered once, kept.
	start()
	if p.discovery.Load() != 2 {
		t.Fatalf("%d discoveries", p.discovery.Load())
	}
}

// Discovery refuses a provider whose endpoints would carry the code, the
// verifier or the secret in clear, and picks how the client
// authenticates.
func TestOIDCDiscoveryChecks(t *testing.T) {
	clock := &oidcTestClock{t: time.Now()}
	for _, tt := range []struct {
		name   string
		meta   map[string]any
		secret string
		style  oauth2.AuthStyle
		err    string
	}{
		{"public client", nil, "", oauth2.AuthStyleInParams, ""},
		{"secret, no methods listed: basic", nil, "s", oauth2.AuthStyleInHeader, ""},
		{"secret, post only", map[string]any{"token_endpoint_auth_methods_supported": []string{"client_secret_post"}}, "s", oauth2.AuthStyleInParams, ""},
		{"secret, neither", map[string]any{"token_endpoint_auth_methods_supported": []string{"private_key_jwt"}}, "s", 0, "neither client_secret_basic nor client_secret_post"},
		{"plain http token endpoint", map[string]any{"token_endpoint": "http://127.0.0.1:9/token"}, "", 0, `token_endpoint "http://127.0.0.1:9/token" is plain http`},
		{"plain http keys", map[string]any{"jwks_uri": "http://idp.example/keys"}, "", 0, "jwks_uri"},
		{"no token endpoint", map[string]any{"token_endpoint": ""}, "", 0, "no usable token_endpoint"},
		{"another issuer", map[string]any{"issuer": "https://evil.example"}, "", 0, "issuer"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := newOIDCTestProvider(t, clock, true, tt.meta)
			f, err := newOIDCFlow(OIDCOptions{Issuer: p.srv.URL, ClientID: "console", ClientSecret: tt.secret,
				RedirectURL: "https://gw.example/console/oidc/callback", HTTPClient: p.srv.Client()})
			if err != nil {
				t.Fatal(err)
			}
			idp, err := f.provider(context.Background(), clock.now())
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if idp.oauth.Endpoint.AuthStyle != tt.style {
				t.Fatalf("auth style %v, want %v", idp.oauth.Endpoint.AuthStyle, tt.style)
			}
		})
	}
}

func TestOIDCFlowOptions(t *testing.T) {
	f, err := newOIDCFlow(OIDCOptions{Issuer: "https://idp.example", ClientID: "c", RedirectURL: "https://gw.example/console/oidc/callback"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(f.scopes, " ") != "openid profile email" {
		t.Errorf("default scopes %q", f.scopes)
	}
	if f.client == nil || f.client.Timeout == 0 {
		t.Error("no default HTTP client with a timeout")
	}
	f, _ = newOIDCFlow(OIDCOptions{Issuer: "https://idp.example", ClientID: "c", RedirectURL: "https://gw.example/console/oidc/callback",
		Scopes: []string{"email", "openid", "api://toolgate/.default"}})
	if strings.Join(f.scopes, " ") != "openid email api://toolgate/.default" {
		t.Errorf("scopes %q: openid must come once, first", f.scopes)
	}
	for _, bad := range []OIDCOptions{
		{Issuer: "https://idp.example", ClientID: "c", RedirectURL: "https://gw.example/callback"},
		{Issuer: "https://idp.example", ClientID: "c", RedirectURL: "/console/oidc/callback"},
		{Issuer: "https://idp.example", RedirectURL: "https://gw.example/console/oidc/callback"},
		{ClientID: "c", RedirectURL: "https://gw.example/console/oidc/callback"},
	} {
		if _, err := newOIDCFlow(bad); err == nil {
			t.Errorf("newOIDCFlow(%+v) succeeded", bad)
		}
	}
}

func TestPendingLoginsAreSingleUseAndBounded(t *testing.T) {
	now := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	p := newPendingLogins()
	p.put("a", &pendingLogin{nonce: "n", expires: now.Add(pendingTTL)}, now)
	if p.take("b", now) != nil || p.take("", now) != nil {
		t.Fatal("an unknown state was taken")
	}
	if pl := p.take("a", now); pl == nil || pl.nonce != "n" {
		t.Fatal("the state was not taken")
	}
	if p.take("a", now) != nil {
		t.Fatal("a state was taken twice")
	}
	// Full: the sign-in closest to expiring makes room.
	for i := range maxPending {
		p.put(randomToken(), &pendingLogin{expires: now.Add(pendingTTL + time.Duration(i)*time.Millisecond)}, now)
	}
	p.put("first-to-expire", &pendingLogin{expires: now.Add(time.Second)}, now)
	p.put("newest", &pendingLogin{expires: now.Add(pendingTTL + time.Hour)}, now)
	if p.len() != maxPending {
		t.Fatalf("%d pending, bound %d", p.len(), maxPending)
	}
	if p.take("first-to-expire", now) != nil || p.take("newest", now) == nil {
		t.Fatal("the wrong sign-in made room")
	}
	// Expired ones are swept when a new one comes.
	later := now.Add(pendingTTL + time.Hour)
	p.put("late", &pendingLogin{expires: later.Add(pendingTTL)}, later)
	if p.len() != 1 {
		t.Fatalf("%d pending after the sweep", p.len())
	}
}

func TestOIDCHelpers(t *testing.T) {
	if !isToken(randomToken()) || isToken("short") || isToken(strings.Repeat("A", 43)+"=") || isToken("") {
		t.Error("isToken")
	}
	k := jwkstest.NewKey("k", "ES256")
	if iss := jwtIssuer(k.Sign(jwt.MapClaims{"iss": "https://idp.example", "sub": "a"})); iss != "https://idp.example" {
		t.Errorf("jwtIssuer = %q", iss)
	}
	if iss := jwtIssuer("a.b"); iss != "" {
		t.Errorf("jwtIssuer of garbage = %q", iss)
	}
	if c := clip(strings.Repeat("é", 400)); len(c) > 310 || !strings.HasSuffix(c, "…") {
		t.Errorf("clip: %d bytes", len(c))
	}
}
