package gateway

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/internal/jwks/jwkstest"
)

// The gateway's audience in these tests (auth.jwt.audience).
const oidcGatewayAudience = "toolgate-gateway"

// op is an OpenID provider on loopback: discovery, keys, an authorization
// endpoint that signs the user in at once and sends the browser back with
// a code, and a token endpoint that checks the code, the exact redirect
// URI, the PKCE verifier and the client, like a real provider.
type op struct {
	t        *testing.T
	srv      *httptest.Server
	key      *jwkstest.Key
	clientID string
	secret   string // "" : a public client
	redirect string // the registered redirect URI

	mu       sync.Mutex
	grants   map[string]*grant // by code
	auths    []url.Values      // authorization requests received
	tokens   []url.Values      // token requests received
	refusals []string          // why the token endpoint refused
	down     bool              // discovery answers 503
	user     opUser
}

// opUser is who signs in and what the provider puts in its tokens.
type opUser struct {
	sub   string
	roles []string
	// Knobs for a misbehaving or attacked provider.
	errorCode     string // the authorization endpoint answers with this error
	nonce         string // the ID token's nonce instead of the request's
	idAudience    string // the ID token's aud instead of the client id
	idExpired     bool
	idKey         *jwkstest.Key // signs the ID token instead of the provider's key
	accessAud     string        // the access token's aud instead of the gateway's
	accessOpaque  bool          // the access token is not a JWT
	accessSub     string        // the access token's sub instead of sub
	wrongVerifier bool          // the grant records the challenge of another verifier
	responseIss   string        // the authorization response's iss (RFC 9207)
	tokenType     string        // the token response's token_type instead of Bearer
}

type grant struct {
	clientID, redirect, challenge, method, nonce string
	used                                         bool
}

func newOP(t *testing.T, clientID, secret string) *op {
	p := &op{t: t, key: jwkstest.NewKey("op-1", "ES256"), clientID: clientID, secret: secret, grants: map[string]*grant{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET /keys", func(w http.ResponseWriter, _ *http.Request) {
		writeOPJSON(w, 200, map[string]any{"keys": []any{p.key.JWK()}})
	})
	mux.HandleFunc("GET /authorize", p.authorize)
	mux.HandleFunc("POST /token", p.token)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *op) issuer() string { return p.srv.URL }

func (p *op) set(u opUser) {
	p.mu.Lock()
	p.user = u
	p.mu.Unlock()
}

func (p *op) setDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
}

func (p *op) counts() (auths, tokens int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.auths), len(p.tokens)
}

func writeOPJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b)
}

func (p *op) discovery(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	down := p.down
	p.mu.Unlock()
	if down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	writeOPJSON(w, 200, map[string]any{
		"issuer":                                p.issuer(),
		"authorization_endpoint":                p.issuer() + "/authorize",
		"token_endpoint":                        p.issuer() + "/token",
		"jwks_uri":                              p.issuer() + "/keys",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"ES256"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "none"},
	})
}

func randomString() string {
	b := make([]byte, 24)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// authorize signs the user in at once. Like a real provider it refuses,
// without redirecting, a client or redirect URI it does not know.
func (p *op) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.auths = append(p.auths, q)
	if q.Get("client_id") != p.clientID || q.Get("redirect_uri") != p.redirect {
		http.Error(w, "unknown client or redirect_uri", http.StatusBadRequest)
		return
	}
	back, _ := url.Parse(p.redirect)
	v := url.Values{"state": {q.Get("state")}}
	if p.user.errorCode != "" {
		v.Set("error", p.user.errorCode)
		v.Set("error_description", `<script>alert("owned")</script> Mallory says: call 555-0100`)
	} else {
		code := randomString()
		g := &grant{clientID: q.Get("client_id"), redirect: q.Get("redirect_uri"),
			challenge: q.Get("code_challenge"), method: q.Get("code_challenge_method"), nonce: q.Get("nonce")}
		if p.user.wrongVerifier {
			g.challenge = s256(randomString())
		}
		p.grants[code] = g
		v.Set("code", code)
	}
	if p.user.responseIss != "" {
		v.Set("iss", p.user.responseIss)
	}
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

func (p *op) refuse(w http.ResponseWriter, code, why string) {
	p.refusals = append(p.refusals, why)
	writeOPJSON(w, http.StatusBadRequest, map[string]any{"error": code, "error_description": why})
}

// token exchanges a code as RFC 6749 §4.1.3 and RFC 7636 §4.6 require.
func (p *op) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	f := r.PostForm
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tokens = append(p.tokens, f)
	client := f.Get("client_id")
	if p.secret != "" {
		id, sec, ok := r.BasicAuth()
		if !ok || id != p.clientID || subtle.ConstantTimeCompare([]byte(sec), []byte(p.secret)) != 1 {
			p.refuse(w, "invalid_client", "client authentication failed")
			return
		}
		client = id
	}
	if client != p.clientID {
		p.refuse(w, "invalid_client", "unknown client_id "+client)
		return
	}
	if f.Get("grant_type") != "authorization_code" {
		p.refuse(w, "unsupported_grant_type", "grant_type "+f.Get("grant_type"))
		return
	}
	g := p.grants[f.Get("code")]
	switch {
	case g == nil:
		p.refuse(w, "invalid_grant", "unknown code")
		return
	case g.used:
		p.refuse(w, "invalid_grant", "code used already")
		return
	}
	g.used = true
	switch {
	case g.clientID != client:
		p.refuse(w, "invalid_grant", "code of another client")
		return
	case f.Get("redirect_uri") != g.redirect:
		p.refuse(w, "invalid_grant", "redirect_uri differs from the authorization request's")
		return
	case g.method != "S256" || g.challenge == "":
		p.refuse(w, "invalid_request", "no S256 code challenge was sent")
		return
	case f.Get("code_verifier") == "" || s256(f.Get("code_verifier")) != g.challenge:
		p.refuse(w, "invalid_grant", "code_verifier does not match the code_challenge")
		return
	}
	u := p.user
	now := time.Now()
	idClaims := jwt.MapClaims{
		"iss": p.issuer(), "sub": u.sub, "aud": p.clientID, "azp": p.clientID, "nonce": g.nonce,
		"iat": now.Unix(), "exp": now.Add(10 * time.Minute).Unix(),
		// Claims the console must not take tenant or roles from.
		"tenant": "globex", "roles": []string{"policy-admin"},
	}
	if u.nonce != "" {
		idClaims["nonce"] = u.nonce
	}
	if u.idAudience != "" {
		idClaims["aud"], idClaims["azp"] = u.idAudience, u.idAudience
	}
	if u.idExpired {
		idClaims["iat"], idClaims["exp"] = now.Add(-time.Hour).Unix(), now.Add(-30*time.Minute).Unix()
	}
	idKey := p.key
	if u.idKey != nil {
		idKey = u.idKey
	}
	accessSub := u.sub
	if u.accessSub != "" {
		accessSub = u.accessSub
	}
	aud := oidcGatewayAudience
	if u.accessAud != "" {
		aud = u.accessAud
	}
	access := p.key.Sign(jwt.MapClaims{
		"iss": p.issuer(), "sub": accessSub, "aud": aud, "azp": p.clientID,
		"tenant": "acme", "roles": u.roles, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	})
	if u.accessOpaque {
		access = randomString()
	}
	tokenType := "Bearer"
	if u.tokenType != "" {
		tokenType = u.tokenType
	}
	writeOPJSON(w, 200, map[string]any{
		"access_token": access, "token_type": tokenType, "expires_in": 3600,
		"id_token": idKey.Sign(idClaims),
	})
}

// startWithOP runs a gateway whose console signs in with provider p.
// secretFile is console.client_secret_file ("" : a public client).
func startWithOP(t *testing.T, p *op, secretFile string) *harness {
	t.Helper()
	return start(t, func(s *setup) {
		s.authYAML = fmt.Sprintf("    oidc_issuer: %s\n    audience: %s\n", p.issuer(), oidcGatewayAudience)
		s.yamlFor = func(base string) string {
			p.mu.Lock()
			p.redirect = base + "/console/oidc/callback"
			p.mu.Unlock()
			y := fmt.Sprintf("console:\n  client_id: %s\n  redirect_url: %s/console/oidc/callback\n", p.clientID, base)
			if secretFile != "" {
				y += fmt.Sprintf("  client_secret_file: %s\n", secretFile)
			}
			return y
		}
	})
}

// toCallback starts a sign-in and follows the browser to the provider,
// stopping before the provider's redirect to the console's callback,
// whose URL it returns.
func (b *browser) toCallback(next string) *url.URL {
	b.t.Helper()
	path := "/console/oidc/login"
	if next != "" {
		path += "?next=" + url.QueryEscape(next)
	}
	c := *b.client
	var callback *url.URL
	c.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if req.URL.Path == "/console/oidc/callback" {
			callback = req.URL
			return http.ErrUseLastResponse
		}
		return nil
	}
	resp, err := c.Get(b.h.base + path)
	if err != nil {
		b.t.Fatal(err)
	}
	resp.Body.Close()
	if callback == nil {
		b.t.Fatalf("sign-in did not reach the callback: %d at %s", resp.StatusCode, resp.Request.URL)
	}
	return callback
}

func (b *browser) getURL(u *url.URL) page {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.send(req)
}

// assertRefused checks a callback that must open no session.
func assertRefused(t *testing.T, h *harness, b *browser, p page, want string) {
	t.Helper()
	if p.status != http.StatusBadRequest || p.url.Path != "/console/oidc/callback" {
		t.Fatalf("callback: %d at %s, want 400 at the callback\n%s", p.status, p.url, p.body)
	}
	if !strings.Contains(html.UnescapeString(p.body), want) {
		t.Errorf("the refusal page does not say %q:\n%s", want, p.body)
	}
	assertConsoleHeaders(t, p)
	if n := h.g.console.Sessions(); n != 0 {
		t.Errorf("%d sessions after a refused sign-in", n)
	}
	if o := b.get("/console/"); o.url.Path != "/console/login" {
		t.Errorf("after a refused sign-in the overview is served: %d at %s", o.status, o.url)
	}
}

// Sign-in with the identity provider, through the browser: the console
// sends the browser to the provider with a PKCE challenge, a state and a
// nonce; the provider sends it back with a code; the console exchanges
// it and opens a session with the access token, whose tenant and roles
// are those the API would see.
func TestConsoleOIDCSignIn(t *testing.T) {
	t.Parallel()
	p := newOP(t, "toolgate-console", "")
	p.set(opUser{sub: "alice", roles: []string{"auditor"}})
	h := startWithOP(t, p, "")
	b := h.browser()

	login := b.get("/console/login")
	if !strings.Contains(login.body, `href="/console/oidc/login"`) || !strings.Contains(login.body, "Sign in with the identity provider") {
		t.Fatalf("the sign-in page offers no identity provider:\n%s", login.body)
	}

	// The start of the sign-in: a redirect to the provider, and the
	// binding cookie with its attributes.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(h.base + "/console/oidc/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusFound || loc == nil || loc.Scheme+"://"+loc.Host != p.issuer() || loc.Path != "/authorize" {
		t.Fatalf("start: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	q := loc.Query()
	if q.Get("response_type") != "code" || q.Get("client_id") != "toolgate-console" || q.Get("redirect_uri") != p.redirect ||
		q.Get("code_challenge_method") != "S256" || len(q.Get("code_challenge")) != 43 || len(q.Get("state")) < 32 ||
		len(q.Get("nonce")) < 32 || !strings.Contains(" "+q.Get("scope")+" ", " openid ") {
		t.Fatalf("authorization request %v", q)
	}
	var binding string
	for _, v := range resp.Header.Values("Set-Cookie") {
		if strings.HasPrefix(v, "toolgate_console_oidc=") {
			binding = v
		}
	}
	for _, want := range []string{"HttpOnly", "SameSite=Lax", "Path=/", "Max-Age=600"} {
		if !strings.Contains(binding, want) {
			t.Errorf("binding cookie %q lacks %s", binding, want)
		}
	}
	if strings.Contains(binding, q.Get("state")) || strings.Contains(binding, q.Get("nonce")) {
		t.Errorf("the binding cookie carries the state or the nonce: %q", binding)
	}

	// The whole sign-in, as a browser follows it.
	page := b.get("/console/oidc/login")
	if page.status != 200 || page.url.Path != "/console/" {
		t.Fatalf("sign-in ended with %d at %s\n%s", page.status, page.url, page.body)
	}
	assertConsoleHeaders(t, page)
	// The tenant and roles of the access token, not the ID token's
	// (which names globex and policy-admin).
	if !strings.Contains(page.body, "acme / alice") || !strings.Contains(page.body, `href="/console/audit"`) ||
		strings.Contains(page.body, `href="/console/policy"`) || !strings.Contains(page.body, "signed in with the identity provider") {
		t.Fatalf("overview after sign-in:\n%s", page.body)
	}
	if n := h.g.console.Sessions(); n != 1 {
		t.Fatalf("%d sessions", n)
	}
	if n := h.g.console.PendingSignIns(); n != 1 { // the start above, never finished
		t.Errorf("%d pending sign-ins, want 1", n)
	}
	// The provider saw a PKCE exchange with the exact redirect URI.
	p.mu.Lock()
	last := p.tokens[len(p.tokens)-1]
	refusals := p.refusals
	p.mu.Unlock()
	if len(refusals) != 0 || last.Get("redirect_uri") != p.redirect || last.Get("code_verifier") == "" || last.Get("client_secret") != "" {
		t.Fatalf("token request %v, refusals %v", last, refusals)
	}
	// The session cookie names the session; it carries no token.
	u, _ := url.Parse(h.base + "/console/")
	for _, c := range b.client.Jar.Cookies(u) {
		if strings.Count(c.Value, ".") == 2 {
			t.Errorf("cookie %s carries a JWT", c.Name)
		}
	}
	// Signed in, the sign-in page sends the browser on.
	if l := b.get("/console/login"); l.url.Path != "/console/" {
		t.Errorf("sign-in page while signed in: %s", l.url)
	}

	// Roles come from the access token: an approver sees no audit log.
	p.set(opUser{sub: "bob", roles: []string{"approver"}})
	b2 := h.browser()
	page = b2.get("/console/oidc/login")
	if page.url.Path != "/console/" || !strings.Contains(page.body, "acme / bob") || strings.Contains(page.body, `href="/console/audit"`) {
		t.Fatalf("approver's overview: %d at %s\n%s", page.status, page.url, page.body)
	}
	if a := b2.get("/console/audit"); a.status != http.StatusForbidden {
		t.Errorf("an approver's /console/audit: %d", a.status)
	}

	// next is kept when it is a console page, and only then.
	p.set(opUser{sub: "alice", roles: []string{"auditor"}})
	for next, want := range map[string]string{
		"/console/audit?tool=read-file": "/console/audit?tool=read-file",
		"https://evil.example/":         "/console/",
		"//evil.example/x":              "/console/",
		"/v1/tools":                     "/console/",
	} {
		b3 := h.browser()
		got := b3.get("/console/oidc/login?next=" + url.QueryEscape(next))
		if got.url.Host != u.Host || got.url.RequestURI() != want {
			t.Errorf("next=%q led to %s (%d), want %s", next, got.url, got.status, want)
		}
	}
	// The sign-in page carries next to the identity provider's link.
	l := h.browser().get("/console/login?next=" + url.QueryEscape("/console/audit?tool=x"))
	if !strings.Contains(l.body, `href="/console/oidc/login?next=%2fconsole%2faudit%3ftool%3dx"`) {
		t.Errorf("the identity provider's link does not carry next:\n%s", l.body)
	}

	// Sign out ends the session like a token's.
	out := b.form("/console/", "/console/logout", nil)
	if out.url.Path != "/console/login" || b.get("/console/").url.Path != "/console/login" {
		t.Fatalf("sign out: %d at %s", out.status, out.url)
	}
}

// Every doubt in the callback refuses the sign-in: a 400 page with a
// fixed message and no session.
func TestConsoleOIDCRefusesBadCallbacks(t *testing.T) {
	t.Parallel()
	p := newOP(t, "toolgate-console", "")
	p.set(opUser{sub: "alice", roles: []string{"auditor"}})
	h := startWithOP(t, p, "")
	rogue := jwkstest.NewKey("op-1", "ES256") // the provider's kid, not its key

	t.Run("tampered state", func(t *testing.T) {
		b := h.browser()
		cb := b.toCallback("")
		bad := *cb
		q := bad.Query()
		q.Set("state", q.Get("state")+"x")
		bad.RawQuery = q.Encode()
		_, tokensBefore := p.counts()
		assertRefused(t, h, b, b.getURL(&bad), "This sign-in is unknown, has expired or was already used.")
		if _, tokens := p.counts(); tokens != tokensBefore {
			t.Error("the code was exchanged for a tampered state")
		}
		// A state nobody issued, and none at all.
		for _, raw := range []string{"/console/oidc/callback?code=x&state=" + randomString(), "/console/oidc/callback?code=x"} {
			assertRefused(t, h, b, b.get(raw), "This sign-in is unknown")
		}
	})

	t.Run("replayed callback", func(t *testing.T) {
		b := h.browser()
		cb := b.toCallback("")
		if ok := b.getURL(cb); ok.status != 200 || ok.url.Path != "/console/" {
			t.Fatalf("first use: %d at %s", ok.status, ok.url)
		}
		again := b.getURL(cb)
		if again.status != http.StatusBadRequest || !strings.Contains(again.body, "already used") {
			t.Fatalf("second use: %d at %s\n%s", again.status, again.url, again.body)
		}
		if n := h.g.console.Sessions(); n != 1 {
			t.Fatalf("%d sessions after a replay, want the first one only", n)
		}
		b.form("/console/", "/console/logout", nil)
		if n := h.g.console.Sessions(); n != 0 {
			t.Fatalf("%d sessions after sign out", n)
		}
		// In another browser neither.
		other := h.browser()
		assertRefused(t, h, other, other.getURL(cb), "already used")
	})

	t.Run("callback in a browser without the binding cookie", func(t *testing.T) {
		cb := h.browser().toCallback("")
		_, tokensBefore := p.counts()
		other := h.browser()
		assertRefused(t, h, other, other.getURL(cb), "This sign-in was not started in this browser.")
		if _, tokens := p.counts(); tokens != tokensBefore {
			t.Error("the code was exchanged without the binding cookie")
		}
	})

	t.Run("callback in a browser that started another sign-in (login CSRF)", func(t *testing.T) {
		attacker := h.browser().toCallback("")
		victim := h.browser()
		victim.toCallback("") // the victim has a binding cookie of its own
		assertRefused(t, h, victim, victim.getURL(attacker), "This sign-in was not started in this browser.")
	})

	t.Run("code injected into another sign-in (PKCE)", func(t *testing.T) {
		// The attacker's code, with the victim's own state and cookie: the
		// victim's verifier does not match the attacker's challenge.
		attacker := h.browser().toCallback("")
		victim := h.browser()
		cb := victim.toCallback("")
		q := cb.Query()
		q.Set("code", attacker.Query().Get("code"))
		cb.RawQuery = q.Encode()
		assertRefused(t, h, victim, victim.getURL(cb), "The identity provider could not sign you in.")
		p.mu.Lock()
		why := p.refusals[len(p.refusals)-1]
		p.mu.Unlock()
		if why != "code_verifier does not match the code_challenge" {
			t.Errorf("the provider refused because %q", why)
		}
	})

	cases := []struct {
		name string
		user opUser
		want string
	}{
		{"the provider refuses the code verifier", opUser{wrongVerifier: true}, "The identity provider could not sign you in."},
		{"nonce mismatch", opUser{nonce: "not-the-nonce"}, "The identity provider's answer could not be verified."},
		{"ID token for another client", opUser{idAudience: "another-client"}, "The identity provider's answer could not be verified."},
		{"expired ID token", opUser{idExpired: true}, "The identity provider's answer could not be verified."},
		{"ID token signed by another key", opUser{idKey: rogue}, "The identity provider's answer could not be verified."},
		{"access token without the gateway's audience", opUser{accessAud: "https://other-api.example"}, "JWT access token for the gateway's audience"},
		{"opaque access token", opUser{accessOpaque: true}, "JWT access token for the gateway's audience"},
		{"access token of another subject", opUser{accessSub: "mallory"}, "The identity provider's answer could not be verified."},
		{"access token of another type", opUser{tokenType: "DPoP"}, "JWT access token for the gateway's audience"},
		{"the response names another issuer", opUser{responseIss: "https://evil.example"}, "The identity provider's answer could not be verified."},
		{"the provider denies access", opUser{errorCode: "access_denied"}, "The identity provider did not sign you in (access denied)."},
		{"the provider fails", opUser{errorCode: "server_error"}, "The identity provider could not sign you in."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			u := tc.user
			u.sub, u.roles = "alice", []string{"auditor"}
			p.set(u)
			defer p.set(opUser{sub: "alice", roles: []string{"auditor"}})
			b := h.browser()
			got := b.get("/console/oidc/login")
			assertRefused(t, h, b, got, tc.want)
			// Nothing the provider said is shown.
			for _, leak := range []string{"owned", "Mallory", "555-0100", "code_verifier", "not-the-nonce", "another-client"} {
				if strings.Contains(got.body, leak) {
					t.Errorf("the page shows %q:\n%s", leak, got.body)
				}
			}
		})
	}

	// After all that, a good sign-in still works.
	if ok := h.browser().get("/console/oidc/login"); ok.status != 200 || ok.url.Path != "/console/" {
		t.Fatalf("good sign-in after the refusals: %d at %s", ok.status, ok.url)
	}
}

// A confidential client authenticates at the token endpoint with the
// secret of console.client_secret_file; a wrong secret signs nobody in.
func TestConsoleOIDCConfidentialClient(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, wrong := filepath.Join(dir, "good"), filepath.Join(dir, "wrong")
	must(t, os.WriteFile(good, []byte("s3cret-of-the-console\n"), 0o600))
	must(t, os.WriteFile(wrong, []byte("not-the-secret\n"), 0o600))

	p := newOP(t, "toolgate-console", "s3cret-of-the-console")
	p.set(opUser{sub: "alice", roles: []string{"auditor"}})
	h := startWithOP(t, p, good)
	if page := h.browser().get("/console/oidc/login"); page.status != 200 || page.url.Path != "/console/" || !strings.Contains(page.body, "acme / alice") {
		t.Fatalf("confidential client sign-in: %d at %s\n%s", page.status, page.url, page.body)
	}

	p2 := newOP(t, "toolgate-console", "s3cret-of-the-console")
	p2.set(opUser{sub: "alice", roles: []string{"auditor"}})
	h2 := startWithOP(t, p2, wrong)
	b := h2.browser()
	assertRefused(t, h2, b, b.get("/console/oidc/login"), "The identity provider could not sign you in.")
	p2.mu.Lock()
	refusals := p2.refusals
	p2.mu.Unlock()
	if len(refusals) != 1 || refusals[0] != "client authentication failed" {
		t.Fatalf("provider refusals %v", refusals)
	}
}

// A provider that is down when the gateway starts does not stop it: the
// REST API and token sign-in work, and sign-in with the provider answers
// that it cannot be reached.
func TestConsoleOIDCProviderDownAtStart(t *testing.T) {
	t.Parallel()
	p := newOP(t, "toolgate-console", "")
	p.setDown(true)
	h := startWithOP(t, p, "")
	b := h.browser()
	got := b.get("/console/oidc/login")
	if got.status != http.StatusServiceUnavailable || !strings.Contains(got.body, "The identity provider cannot be reached right now.") {
		t.Fatalf("sign-in with a provider that is down: %d\n%s", got.status, got.body)
	}
	assertConsoleHeaders(t, got)
	if auths, _ := p.counts(); auths != 0 || h.g.console.PendingSignIns() != 0 {
		t.Fatalf("a sign-in started without discovery: %d authorization requests, %d pending", auths, h.g.console.PendingSignIns())
	}
	if r := h.call(h.token("acme", "alice", "developer"), "read-file", `{"arguments":{"path":"docs/guide.md"}}`); r.status != 200 {
		t.Fatalf("the API with the provider down: %d %s", r.status, r.raw)
	}
	b.signIn(h.token("acme", "erin", "auditor"))
}
