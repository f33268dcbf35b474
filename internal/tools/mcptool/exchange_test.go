package mcptool

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/x509"
	encjson "encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
	"github.com/toolgate/toolgate/internal/assertion"
	"github.com/toolgate/toolgate/internal/tools"
)

// realSigner is the gateway's assertion signer over a fresh key, and the
// public key an STS verifies its assertions with.
func realSigner(t *testing.T) (*assertion.Signer, ed25519.PublicKey) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "assertion.pem")
	if _, err := assertion.EnsureKey(file); err != nil {
		t.Fatal(err)
	}
	s, err := assertion.New(assertion.Options{Issuer: "toolgate", TTL: time.Minute, SigningKeyFile: file})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return s, k.(ed25519.PrivateKey).Public().(ed25519.PublicKey)
}

// STS failure modes.
const (
	stsOK = iota
	stsInvalidGrant
	stsNoIssuedType
	stsNotBearer
	stsBadToken
)

// testSTS is an RFC 8693 security token service on loopback. It checks
// every rule of the exchange the gateway must follow (a request breaking
// one fails the test) and issues "tok.<tenant>.<sub>.<n>" for the
// verified subject token.
type testSTS struct {
	t                  *testing.T
	pub                ed25519.PublicKey
	audience, resource string
	expiresIn          int
	mode               atomic.Int32
	srv                *httptest.Server

	mu        sync.Mutex
	exchanges []jwt.MapClaims // the verified subject tokens, in order
	issued    map[string]string
}

func newTestSTS(t *testing.T, pub ed25519.PublicKey) *testSTS {
	s := &testSTS{t: t, pub: pub, expiresIn: 3600, issued: map[string]string{}}
	s.srv = httptest.NewServer(s)
	t.Cleanup(s.srv.Close)
	return s
}

func (s *testSTS) URL() string { return s.srv.URL + "/token" }

func (s *testSTS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	bad := func(format string, a ...any) {
		s.t.Errorf("STS: "+format, a...)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":"invalid_request"}`)
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if r.Method != http.MethodPost || r.URL.Path != "/token" || r.ParseForm() != nil {
		bad("%s %s", r.Method, r.URL.Path)
		return
	}
	f := r.PostForm
	want := map[string]string{
		"grant_type":           "urn:ietf:params:oauth:grant-type:token-exchange",
		"client_id":            "toolgate",
		"client_secret":        "s3cret",
		"subject_token_type":   TokenTypeJWT,
		"requested_token_type": TokenTypeAccessToken,
		"audience":             s.audience,
		"resource":             s.resource,
		"scope":                "notes.read notes.list",
	}
	for k, v := range want {
		if got := f.Get(k); got != v {
			bad("%s = %q, want %q", k, got, v)
			return
		}
	}
	if r.Header.Get("Authorization") != "" || r.URL.RawQuery != "" {
		bad("credentials outside the body")
		return
	}
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(f.Get("subject_token"), claims, func(*jwt.Token) (any, error) { return s.pub, nil },
		jwt.WithValidMethods([]string{"EdDSA"}), jwt.WithIssuer("toolgate"), jwt.WithExpirationRequired())
	if err != nil {
		bad("subject token does not verify with the gateway's key: %v", err)
		return
	}
	s.mu.Lock()
	s.exchanges = append(s.exchanges, claims)
	n := len(s.exchanges)
	s.mu.Unlock()
	tenant, _ := claims["tenant"].(string)
	sub, _ := claims["sub"].(string)
	if tenant == "" {
		tenant = "gateway"
	}
	tok := fmt.Sprintf("tok.%s.%s.%d", tenant, sub, n)
	body := map[string]any{"access_token": tok, "issued_token_type": TokenTypeAccessToken, "token_type": "Bearer", "expires_in": s.expiresIn}
	switch s.mode.Load() {
	case stsInvalidGrant:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":"invalid_grant","error_description":"STS-INTERNAL-DETAIL: user disabled in realm corp"}`)
		return
	case stsNoIssuedType:
		delete(body, "issued_token_type")
	case stsNotBearer:
		body["token_type"] = "N_A"
	case stsBadToken:
		body["access_token"] = "two words\r\nX-Evil: 1"
	}
	s.mu.Lock()
	s.issued[tok] = sub + "@" + tenant
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	encjson.NewEncoder(w).Encode(body)
}

// subjects are the "sub@tenant" of the subject tokens exchanged so far.
func (s *testSTS) subjects() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.exchanges {
		out = append(out, fmt.Sprint(c["sub"])+"@"+fmt.Sprint(c["tenant"]))
	}
	return out
}

// userOf is whom an issued token belongs to ("" when the STS did not
// issue it).
func (s *testSTS) userOf(tok string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.issued[tok]
}

// seenCall is one tools/call the upstream served.
type seenCall struct {
	authorization, assertion, user string
}

// authUpstream is an MCP server (the Go SDK's) behind the SDK's own
// bearer-token middleware, accepting only tokens the STS issued, with the
// user id the token names (so the SDK binds each session to its user).
type authUpstream struct {
	srv      *mcp.Server
	http     *httptest.Server
	requests atomic.Int64 // every HTTP request that reached it
	mu       sync.Mutex
	calls    []seenCall
}

func newAuthUpstream(t *testing.T, sts *testSTS) *authUpstream {
	u := &authUpstream{srv: mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)}
	u.srv.AddTool(&mcp.Tool{Name: "whoami", Description: "Says who called.", InputSchema: encjson.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			c := seenCall{authorization: req.Extra.Header.Get("Authorization"), assertion: req.Extra.Header.Get(upstreamv1.AssertionHeader)}
			if req.Extra.TokenInfo != nil {
				c.user = req.Extra.TokenInfo.UserID
			}
			u.mu.Lock()
			u.calls = append(u.calls, c)
			u.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: c.user}}}, nil
		})
	verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		user := sts.userOf(tok)
		if user == "" {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: user, Expiration: time.Now().Add(time.Hour)}, nil
	}
	h := auth.RequireBearerToken(verify, nil)(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.srv }, nil))
	u.http = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.requests.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(u.http.Close)
	sts.audience, sts.resource = u.http.URL+"/mcp", "https://notes.example.com/mcp"
	return u
}

func (u *authUpstream) seen() []seenCall {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seenCall(nil), u.calls...)
}

// exchangeUpstream connects an Upstream with a token exchange at sts to
// up and discovers its whoami tool; log receives the upstream's log.
func exchangeUpstream(t *testing.T, signer Signer, sts *testSTS, up *authUpstream, log *bytes.Buffer) (*Upstream, *Tool) {
	t.Helper()
	lg := slog.New(slog.DiscardHandler)
	if log != nil {
		lg = slog.New(slog.NewTextHandler(&lockedWriter{w: log}, nil))
	}
	u, err := New(Options{Namespace: "notes", URL: up.http.URL + "/mcp", Timeout: 5 * time.Second, MaxConcurrent: 8, MaxResponseBytes: 1 << 20,
		Signer: signer, Logger: lg,
		TokenExchange: &TokenExchange{TokenURL: sts.URL(), ClientID: "toolgate", ClientSecret: "s3cret",
			Audience: up.http.URL + "/mcp", Resource: "https://notes.example.com/mcp", Scope: []string{"notes.read", "notes.list"},
			RequestedTokenType: TokenTypeAccessToken}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	ts, err := u.Discover(context.Background())
	if err != nil || len(ts) != 1 || ts[0].Spec().Name != "notes-whoami" {
		t.Fatalf("discover: %d tools, %v", len(ts), err)
	}
	return u, ts[0]
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// callAs runs tool for principal@tenant with roles.
func callAs(t *testing.T, tool *Tool, tenant, principal string, roles ...string) (tools.Result, error) {
	t.Helper()
	env := &tools.Env{Tenant: tenant, Principal: principal, Roles: roles, CallID: "c-" + principal}
	plan, err := tool.Prepare(context.Background(), env, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	return tool.Run(context.Background(), env, plan.Artifact, tools.Limits{})
}

func TestTokenExchangeGivesEachPrincipalItsOwnTokenAndCachesIt(t *testing.T) {
	signer, pub := realSigner(t)
	sts := newTestSTS(t, pub)
	up := newAuthUpstream(t, sts)
	_, tool := exchangeUpstream(t, signer, sts, up, nil)
	// Discovery spoke as the gateway itself.
	if got := strings.Join(sts.subjects(), " "); got != "@" {
		t.Fatalf("exchanges after discovery: %q", got)
	}

	for _, c := range []struct{ tenant, principal string }{
		{"acme", "alice"}, {"acme", "alice"}, {"acme", "bob"}, {"globex", "alice"}, {"acme", "bob"}, {"acme", "alice"},
	} {
		res, err := callAs(t, tool, c.tenant, c.principal, "developer")
		if err != nil || res.Content != c.principal+"@"+c.tenant {
			t.Fatalf("%s@%s: %q %v (the upstream's session user must be the caller)", c.principal, c.tenant, res.Content, err)
		}
	}
	// One exchange per principal of a tenant; the cache answers the rest.
	if got := strings.Join(sts.subjects(), " "); got != "@ alice@acme bob@acme alice@globex" {
		t.Fatalf("exchanges: %q", got)
	}
	// The same principal with other roles is another subject: the STS may
	// issue a token with other rights.
	if _, err := callAs(t, tool, "acme", "alice", "admin"); err != nil {
		t.Fatal(err)
	}
	if n := len(sts.subjects()); n != 5 {
		t.Fatalf("alice with other roles: %d exchanges, want 5", n)
	}

	// Every tools/call carried its own principal's exchanged token, and the
	// assertion beside it, which names the same principal and this call.
	calls := up.seen()
	if len(calls) != 7 {
		t.Fatalf("upstream saw %d calls", len(calls))
	}
	for i, c := range calls {
		tok, ok := strings.CutPrefix(c.authorization, "Bearer ")
		if !ok || sts.userOf(tok) != c.user || !strings.HasPrefix(tok, "tok.") {
			t.Fatalf("call %d: authorization %q for user %q", i, c.authorization, c.user)
		}
		claims := jwt.MapClaims{}
		if _, err := jwt.ParseWithClaims(c.assertion, claims, func(*jwt.Token) (any, error) { return pub, nil }, jwt.WithValidMethods([]string{"EdDSA"})); err != nil {
			t.Fatalf("call %d: assertion: %v", i, err)
		}
		if claims["sub"].(string)+"@"+claims["tenant"].(string) != c.user || claims["aud"] != "notes-whoami" || claims["call_id"] != "c-"+claims["sub"].(string) {
			t.Fatalf("call %d: assertion %v for user %q", i, claims, c.user)
		}
	}
	// The subject tokens were the calls' assertions: for the tool, naming
	// the call.
	sts.mu.Lock()
	first := sts.exchanges[1]
	sts.mu.Unlock()
	if first["aud"] != "notes-whoami" || first["call_id"] != "c-alice" || first["sub"] != "alice" {
		t.Fatalf("subject token %v", first)
	}
}

func TestTokenExchangeOnceForConcurrentCallsOfOnePrincipal(t *testing.T) {
	signer, pub := realSigner(t)
	sts := newTestSTS(t, pub)
	up := newAuthUpstream(t, sts)
	_, tool := exchangeUpstream(t, signer, sts, up, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			res, err := callAs(t, tool, "acme", "alice")
			if err == nil && res.Content != "alice@acme" {
				err = fmt.Errorf("content %q", res.Content)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(sts.subjects(), " "); got != "@ alice@acme" {
		t.Fatalf("exchanges: %q", got)
	}
}

func TestTokenExchangeFailureFailsTheCallBeforeAnythingIsSent(t *testing.T) {
	for _, c := range []struct {
		name   string
		mode   int32
		down   bool
		reason string
	}{
		{"STS refuses", stsInvalidGrant, false, "answered 400 invalid_grant"},
		{"STS down", stsOK, true, "could not be reached"},
		{"no issued_token_type", stsNoIssuedType, false, "not usable"},
		{"not a Bearer token", stsNotBearer, false, "not Bearer"},
		{"token unfit for a header", stsBadToken, false, "not a valid bearer credential"},
	} {
		t.Run(c.name, func(t *testing.T) {
			signer, pub := realSigner(t)
			sts := newTestSTS(t, pub)
			up := newAuthUpstream(t, sts)
			var log bytes.Buffer
			_, tool := exchangeUpstream(t, signer, sts, up, &log)
			before := up.requests.Load()
			sts.mode.Store(c.mode)
			if c.down {
				sts.srv.Close()
			}
			_, err := callAs(t, tool, "acme", "alice")
			if err == nil || !errors.Is(err, ErrTokenExchange) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("error = %v", err)
			}
			if strings.Contains(err.Error(), "STS-INTERNAL-DETAIL") || strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("the STS's text or the secret is in the error: %v", err)
			}
			// Nothing reached the upstream: no session, no call.
			if n := up.requests.Load() - before; n != 0 || len(up.seen()) != 0 {
				t.Fatalf("the upstream saw %d requests and %d calls", n, len(up.seen()))
			}
			// The STS's own words are for the operator's log.
			if c.mode == stsInvalidGrant && !strings.Contains(log.String(), "STS-INTERNAL-DETAIL") {
				t.Fatalf("log: %s", log.String())
			}
			if strings.Contains(log.String(), "s3cret") {
				t.Fatal("the client secret was logged")
			}
			// Once the STS answers again, the principal's next call works.
			if !c.down {
				sts.mode.Store(stsOK)
				if res, err := callAs(t, tool, "acme", "alice"); err != nil || res.Content != "alice@acme" {
					t.Fatalf("after recovery: %q %v", res.Content, err)
				}
			}
		})
	}
}

// A token about to expire (here: within TokenRefreshMargin of its issue)
// is used for the request it was exchanged for, never cached.
func TestTokenExchangeDoesNotReuseTokensNearExpiry(t *testing.T) {
	signer, pub := realSigner(t)
	sts := newTestSTS(t, pub)
	sts.expiresIn = int(TokenRefreshMargin/time.Second) - 10
	up := newAuthUpstream(t, sts)
	_, tool := exchangeUpstream(t, signer, sts, up, nil)
	alices := func() int { return strings.Count(strings.Join(sts.subjects(), " "), "alice@acme") }
	if res, err := callAs(t, tool, "acme", "alice"); err != nil || res.Content != "alice@acme" {
		t.Fatalf("%q %v", res.Content, err)
	}
	first := alices()
	if res, err := callAs(t, tool, "acme", "alice"); err != nil || res.Content != "alice@acme" {
		t.Fatalf("%q %v", res.Content, err)
	}
	if alices() == first {
		t.Fatalf("the second call reused a token about to expire (exchanges %q)", sts.subjects())
	}
	calls := up.seen()
	if len(calls) != 2 || calls[0].authorization == calls[1].authorization {
		t.Fatalf("calls %+v", calls)
	}
}

func TestTokenExchangeCacheIsBounded(t *testing.T) {
	x := &exchanger{cache: map[subject]issued{}, flights: map[subject]*flight{}}
	now := time.Now()
	x.mu.Lock()
	for i := range MaxCachedTokens {
		x.store(subject{tenant: "t", principal: fmt.Sprint(i)}, issued{token: "t", until: now.Add(time.Hour + time.Duration(i)*time.Second)})
	}
	x.store(subject{tenant: "t", principal: "new"}, issued{token: "n", until: now.Add(2 * time.Hour)})
	x.mu.Unlock()
	if len(x.cache) != MaxCachedTokens {
		t.Fatalf("%d cached tokens", len(x.cache))
	}
	if _, ok := x.cache[subject{tenant: "t", principal: "0"}]; ok {
		t.Fatal("the token that expires first was kept")
	}
	if x.cache[subject{tenant: "t", principal: "new"}].token != "n" {
		t.Fatal("the new token was not cached")
	}
}

// Subjects differ in every part of the identity an assertion states, and
// the gateway is a subject no caller can be.
func TestTokenExchangeSubjectsNeverCollide(t *testing.T) {
	subs := map[subject]string{}
	for name, c := range map[string]struct {
		claims  upstreamv1.Claims
		gateway bool
	}{
		"gateway":             {upstreamv1.Claims{Audience: "notes"}, true},
		"caller no id":        {upstreamv1.Claims{}, false},
		"alice":               {upstreamv1.Claims{Tenant: "acme", Subject: "alice"}, false},
		"alice globex":        {upstreamv1.Claims{Tenant: "globex", Subject: "alice"}, false},
		"bob":                 {upstreamv1.Claims{Tenant: "acme", Subject: "bob"}, false},
		"alice dev":           {upstreamv1.Claims{Tenant: "acme", Subject: "alice", Roles: []string{"dev"}}, false},
		"alice dev,ops":       {upstreamv1.Claims{Tenant: "acme", Subject: "alice", Roles: []string{"dev", "ops"}}, false},
		"alice 'dev ops'":     {upstreamv1.Claims{Tenant: "acme", Subject: "alice", Roles: []string{"dev ops"}}, false},
		"alice 'dev\" \"ops'": {upstreamv1.Claims{Tenant: "acme", Subject: "alice", Roles: []string{`dev" "ops`}}, false},
	} {
		s := subjectOf(c.claims, c.gateway)
		if other, dup := subs[s]; dup {
			t.Fatalf("%s and %s are one subject", name, other)
		}
		subs[s] = name
	}
	// Role order does not matter.
	if subjectOf(upstreamv1.Claims{Roles: []string{"b", "a"}}, false) != subjectOf(upstreamv1.Claims{Roles: []string{"a", "b"}}, false) {
		t.Fatal("role order changes the subject")
	}
}
