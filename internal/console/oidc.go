package console

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/internal/jwks"
)

// OIDCOptions configure sign-in with the identity provider.
type OIDCOptions struct {
	// Issuer is auth.jwt.oidc_issuer: the provider whose access tokens the
	// gateway already accepts.
	Issuer string
	// ClientID is the console's client at the provider (console.client_id).
	ClientID string
	// ClientSecret is the client's secret; "" for a public client (PKCE
	// alone).
	ClientSecret string
	// RedirectURL is the exact redirect URI registered at the provider.
	RedirectURL string
	// Scopes requested (default openid, profile, email; openid is always
	// asked for).
	Scopes []string
	// HTTPClient talks to the provider (discovery, keys, token endpoint);
	// default jwks.NewClient(), the client the authenticator fetches the
	// provider's keys with: a 10 s timeout, at most 5 redirects and never
	// from https to http, bodies of at most 1 MiB.
	HTTPClient *http.Client
}

// Limits of the flow.
const (
	// pendingTTL is how long a sign-in may take at the provider.
	pendingTTL = 10 * time.Minute
	// maxPending bounds the sign-ins started and not finished. Anyone can
	// start one, so when full the one closest to expiring is dropped: a
	// flood costs memory that is bounded, and at worst makes a user start
	// again.
	maxPending = 10000
	// discoveryRetry is how long a failed discovery is remembered: sign-in
	// answers at once that the provider is unreachable, instead of every
	// page load waiting on it.
	discoveryRetry = 10 * time.Second
	// idpTimeout bounds one discovery or code exchange.
	idpTimeout = 10 * time.Second
)

// The cookie that binds a sign-in to the browser that started it.
const (
	cookieOIDC       = "toolgate_console_oidc"
	cookieOIDCSecure = "__Host-toolgate_console_oidc"
)

// oidcFlow is the authorization code flow with PKCE against the provider.
// Discovery is lazy: the gateway starts while the provider is down, the
// first sign-in discovers it (a failure is remembered for discoveryRetry,
// then tried again), and the result is kept for the life of the process
// (its keys are refreshed by go-oidc when a token names an unknown kid).
type oidcFlow struct {
	o       OIDCOptions
	scopes  []string
	client  *http.Client
	pending *pendingLogins

	mu       sync.Mutex // held during discovery: one at a time
	idp      *oidcProvider
	failedAt time.Time
	failure  error
}

type oidcProvider struct {
	provider *oidc.Provider
	oauth    *oauth2.Config
}

func newOIDCFlow(o OIDCOptions) (*oidcFlow, error) {
	if o.Issuer == "" || o.ClientID == "" || o.RedirectURL == "" {
		return nil, errors.New("console: OIDC sign-in needs the issuer, a client id and the redirect URL")
	}
	u, err := url.Parse(o.RedirectURL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.Path != Prefix+"/oidc/callback" {
		return nil, fmt.Errorf("console: redirect URL %q is not an absolute URL of %s/oidc/callback", o.RedirectURL, Prefix)
	}
	scopes := o.Scopes
	if len(scopes) == 0 {
		scopes = []string{"profile", "email"}
	}
	// openid makes it an OpenID Connect request: without it there is no
	// ID token and no nonce to check.
	scopes = append([]string{oidc.ScopeOpenID}, slices.DeleteFunc(slices.Clone(scopes), func(s string) bool { return s == oidc.ScopeOpenID })...)
	client := o.HTTPClient
	if client == nil {
		client = jwks.NewClient()
	}
	return &oidcFlow{o: o, scopes: scopes, client: client, pending: newPendingLogins()}, nil
}

// provider returns the discovered provider, discovering it if needed.
func (f *oidcFlow) provider(ctx context.Context, now time.Time) (*oidcProvider, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.idp != nil {
		return f.idp, nil
	}
	if f.failure != nil && now.Sub(f.failedAt) < discoveryRetry {
		return nil, f.failure
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), idpTimeout)
	defer cancel()
	p, err := f.discover(oidc.ClientContext(ctx, f.client))
	if err != nil {
		f.failure, f.failedAt = err, now
		return nil, err
	}
	f.idp, f.failure = p, nil
	return p, nil
}

// discover reads the provider's discovery document (go-oidc checks that
// it names the configured issuer) and refuses endpoints the code, the
// PKCE verifier or the client secret must not travel to.
func (f *oidcFlow) discover(ctx context.Context) (*oidcProvider, error) {
	p, err := oidc.NewProvider(ctx, f.o.Issuer)
	if err != nil {
		return nil, fmt.Errorf("discovery of %s: %w", f.o.Issuer, err)
	}
	var meta struct {
		JWKSURI     string   `json:"jwks_uri"`
		AuthMethods []string `json:"token_endpoint_auth_methods_supported"`
	}
	if err := p.Claims(&meta); err != nil {
		return nil, fmt.Errorf("discovery of %s: %w", f.o.Issuer, err)
	}
	ep := p.Endpoint()
	iu, _ := url.Parse(f.o.Issuer)
	for _, e := range []struct{ name, raw string }{
		{"authorization_endpoint", ep.AuthURL}, {"token_endpoint", ep.TokenURL}, {"jwks_uri", meta.JWKSURI},
	} {
		u, err := url.Parse(e.raw)
		switch {
		case e.raw == "" || err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") || u.User != nil:
			return nil, fmt.Errorf("discovery of %s: no usable %s (%q)", f.o.Issuer, e.name, e.raw)
		case u.Scheme == "http" && (iu == nil || iu.Scheme != "http" || !loopbackHost(u.Hostname())):
			return nil, fmt.Errorf("discovery of %s: %s %q is plain http; the provider must be reached over https", f.o.Issuer, e.name, e.raw)
		}
	}
	// How the client authenticates at the token endpoint: a public client
	// sends its id in the form (PKCE proves the code is its own); a
	// confidential one uses HTTP Basic, the default of OpenID Connect
	// Discovery, unless the provider supports only client_secret_post.
	switch {
	case f.o.ClientSecret == "":
		ep.AuthStyle = oauth2.AuthStyleInParams
	case len(meta.AuthMethods) == 0 || slices.Contains(meta.AuthMethods, "client_secret_basic"):
		ep.AuthStyle = oauth2.AuthStyleInHeader
	case slices.Contains(meta.AuthMethods, "client_secret_post"):
		ep.AuthStyle = oauth2.AuthStyleInParams
	default:
		return nil, fmt.Errorf("discovery of %s: the token endpoint takes neither client_secret_basic nor client_secret_post (it lists %q)", f.o.Issuer, meta.AuthMethods)
	}
	return &oidcProvider{provider: p, oauth: &oauth2.Config{
		ClientID: f.o.ClientID, ClientSecret: f.o.ClientSecret, Endpoint: ep,
		RedirectURL: f.o.RedirectURL, Scopes: f.scopes,
	}}, nil
}

func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// pendingLogin is a sign-in sent to the provider and not back yet.
type pendingLogin struct {
	nonce    string
	verifier string   // the PKCE code verifier
	binding  [32]byte // SHA-256 of the binding cookie's value
	next     string   // a local page to land on ("" : the overview)
	expires  time.Time
}

// pendingLogins holds the sign-ins in flight by the SHA-256 of their
// state; each is taken once.
type pendingLogins struct {
	mu      sync.Mutex
	byState map[[32]byte]*pendingLogin
}

func newPendingLogins() *pendingLogins {
	return &pendingLogins{byState: map[[32]byte]*pendingLogin{}}
}

func (p *pendingLogins) put(state string, pl *pendingLogin, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, v := range p.byState {
		if !now.Before(v.expires) {
			delete(p.byState, k)
		}
	}
	if len(p.byState) >= maxPending {
		var first [32]byte
		var at time.Time
		for k, v := range p.byState {
			if at.IsZero() || v.expires.Before(at) {
				first, at = k, v.expires
			}
		}
		delete(p.byState, first)
	}
	p.byState[key(state)] = pl
}

// take removes and returns the live sign-in of state (nil: unknown,
// expired or already used).
func (p *pendingLogins) take(state string, now time.Time) *pendingLogin {
	if state == "" {
		return nil
	}
	k := key(state)
	p.mu.Lock()
	defer p.mu.Unlock()
	pl := p.byState[k]
	delete(p.byState, k)
	if pl == nil || !now.Before(pl.expires) {
		return nil
	}
	return pl
}

func (p *pendingLogins) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.byState)
}

func (s *Server) oidcCookieName(r *http.Request) string {
	if s.secure(r) {
		return cookieOIDCSecure
	}
	return cookieOIDC
}

// setBindingCookie sets the cookie that binds sign-ins to this browser.
// It is SameSite=Lax, not Strict like the session cookie: the provider
// sends the browser back to the callback with a top-level GET from the
// provider's site, a cross-site navigation on which a browser leaves
// Strict cookies out. Lax cookies go with cross-site top-level GETs only,
// and this one grants nothing by itself: it only ties a state to the
// browser that started the sign-in, so that a callback URL carrying
// someone else's code (login CSRF) opens no session.
func (s *Server) setBindingCookie(w http.ResponseWriter, r *http.Request, value string) {
	http.SetCookie(w, &http.Cookie{Name: s.oidcCookieName(r), Value: value, Path: "/", HttpOnly: true,
		Secure: s.secure(r), SameSite: http.SameSiteLaxMode, MaxAge: int(pendingTTL / time.Second)})
}

// isToken reports whether v has the shape of a randomToken.
func isToken(v string) bool {
	b, err := base64.RawURLEncoding.DecodeString(v)
	return err == nil && len(b) == 32
}

// oidcLogin starts a sign-in: it records state, nonce and PKCE verifier
// server-side and sends the browser to the provider.
func (s *Server) oidcLogin(w http.ResponseWriter, r *http.Request) {
	if s.oidc == nil {
		s.fail(w, r, http.StatusNotFound, "Sign-in with the identity provider is not configured.")
		return
	}
	now := s.o.Now()
	idp, err := s.oidc.provider(r.Context(), now)
	if err != nil {
		s.o.Logger.Error("console: the identity provider cannot be discovered; OIDC sign-in is unavailable", "issuer", s.oidc.o.Issuer, "err", clip(err.Error()))
		s.fail(w, r, http.StatusServiceUnavailable, "The identity provider cannot be reached right now. Try again in a moment, or sign in with a token.")
		return
	}
	// One binding value per browser, reused while it lives, so that two
	// tabs signing in at once do not undo each other.
	binding := ""
	if c, _ := r.Cookie(s.oidcCookieName(r)); c != nil && isToken(c.Value) {
		binding = c.Value
	} else {
		binding = randomToken()
	}
	s.setBindingCookie(w, r, binding)
	state, nonce, verifier := randomToken(), randomToken(), oauth2.GenerateVerifier()
	s.oidc.pending.put(state, &pendingLogin{
		nonce: nonce, verifier: verifier, binding: key(binding),
		next: localNext(r.URL.Query().Get("next")), expires: now.Add(pendingTTL),
	}, now)
	http.Redirect(w, r, idp.oauth.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), http.StatusFound)
}

// Fixed messages of a refused callback: nothing the provider or the URL
// says is shown.
const (
	msgStartAgain  = "This sign-in is unknown, has expired or was already used. No session was opened; start again from the sign-in page."
	msgOtherBrowse = "This sign-in was not started in this browser. No session was opened; start again from the sign-in page."
	msgDenied      = "The identity provider did not sign you in (access denied). No session was opened."
	msgIdPRefused  = "The identity provider could not sign you in. No session was opened; start again from the sign-in page."
	msgUnverified  = "The identity provider's answer could not be verified. No session was opened; start again from the sign-in page."
	msgAccessToken = "You signed in at the identity provider, but the access token it issued is not one this gateway accepts, so no session was opened. " +
		"The identity provider must issue this console's client a JWT access token for the gateway's audience (auth.jwt.audience), " +
		"carrying the tenant and roles claims the gateway is configured for; ask your administrator (see docs/console-signin.md)."
)

// oidcCallback finishes a sign-in. Any doubt refuses it: a 400 page with
// a fixed message, no session, the details in the log.
func (s *Server) oidcCallback(w http.ResponseWriter, r *http.Request) {
	if s.oidc == nil {
		s.fail(w, r, http.StatusNotFound, "Sign-in with the identity provider is not configured.")
		return
	}
	refuse := func(msg, reason string, args ...any) {
		s.o.Logger.Info("console: OIDC sign-in refused", append([]any{"reason", reason, "remote", r.RemoteAddr}, args...)...)
		s.fail(w, r, http.StatusBadRequest, msg)
	}
	now := s.o.Now()
	q := r.URL.Query()
	// The state is used up whatever happens next.
	pl := s.oidc.pending.take(q.Get("state"), now)
	if pl == nil {
		refuse(msgStartAgain, "unknown, expired or used state")
		return
	}
	c, _ := r.Cookie(s.oidcCookieName(r))
	if c == nil {
		refuse(msgOtherBrowse, "no binding cookie")
		return
	}
	if h := key(c.Value); subtle.ConstantTimeCompare(h[:], pl.binding[:]) != 1 {
		refuse(msgOtherBrowse, "binding cookie does not match the state")
		return
	}
	if e := q.Get("error"); e != "" {
		msg := msgIdPRefused
		if e == "access_denied" {
			msg = msgDenied
		}
		refuse(msg, "the identity provider returned an error", "error", clip(e), "error_description", clip(q.Get("error_description")))
		return
	}
	code := q.Get("code")
	if code == "" {
		refuse(msgIdPRefused, "no code")
		return
	}
	if iss := q.Get("iss"); iss != "" && iss != s.oidc.o.Issuer {
		// RFC 9207: a provider that names itself must be ours (mix-up).
		refuse(msgUnverified, "the response names another issuer", "iss", clip(iss))
		return
	}
	idp, err := s.oidc.provider(r.Context(), now)
	if err != nil {
		refuse(msgIdPRefused, "the identity provider cannot be discovered", "err", clip(err.Error()))
		return
	}
	ctx, cancel := context.WithTimeout(oidc.ClientContext(r.Context(), s.oidc.client), idpTimeout)
	defer cancel()
	tok, err := idp.oauth.Exchange(ctx, code, oauth2.VerifierOption(pl.verifier))
	if err != nil {
		refuse(msgIdPRefused, "the code exchange failed", "err", clip(err.Error()))
		return
	}

	// The ID token: the provider's signature, the issuer, this client as
	// audience, not expired, and the nonce of this sign-in.
	rawID, _ := tok.Extra("id_token").(string)
	if rawID == "" {
		refuse(msgUnverified, "no ID token in the token response")
		return
	}
	idt, err := idp.provider.Verifier(&oidc.Config{ClientID: s.oidc.o.ClientID, Now: s.o.Now}).Verify(ctx, rawID)
	if err != nil {
		refuse(msgUnverified, "the ID token does not verify", "err", clip(err.Error()))
		return
	}
	if !sameSecret(idt.Nonce, pl.nonce) {
		refuse(msgUnverified, "the ID token's nonce is not this sign-in's")
		return
	}
	if len(idt.Audience) > 1 {
		// OpenID Connect Core 3.1.3.7: with several audiences, the
		// authorized party must be this client.
		var c struct {
			AZP string `json:"azp"`
		}
		if err := idt.Claims(&c); err != nil || c.AZP != s.oidc.o.ClientID {
			refuse(msgUnverified, "the ID token has several audiences and another authorized party", "azp", clip(c.AZP))
			return
		}
	}
	if idt.AccessTokenHash != "" {
		if err := idt.VerifyAccessToken(tok.AccessToken); err != nil {
			refuse(msgUnverified, "the access token does not match the ID token's at_hash", "err", clip(err.Error()))
			return
		}
	}

	// The session's credential: the access token, verified exactly like
	// an API request's bearer token, so tenant and roles are the ones the
	// API would see.
	at := tok.AccessToken
	if !strings.EqualFold(tok.Type(), "Bearer") || strings.Count(at, ".") != 2 {
		refuse(msgAccessToken, "the access token is not a bearer JWT", "token_type", clip(tok.Type()))
		return
	}
	id, err := s.verify(r.Context(), at)
	if err != nil {
		refuse(msgAccessToken, "the access token is not accepted by the gateway", "err", clip(err.Error()), "subject", clip(idt.Subject))
		return
	}
	if id.Method != "jwt" {
		refuse(msgAccessToken, "the access token verified as something other than a JWT", "method", id.Method)
		return
	}
	if iss := jwtIssuer(at); iss != s.oidc.o.Issuer {
		refuse(msgAccessToken, "the access token is not the identity provider's", "iss", clip(iss))
		return
	}
	if id.Principal != idt.Subject {
		refuse(msgUnverified, "the access token and the ID token name different subjects", "access_sub", clip(id.Principal), "id_sub", clip(idt.Subject))
		return
	}

	if old, _ := r.Cookie(s.cookieName(r)); old != nil {
		s.sessions.end(old.Value)
	}
	cookie, _ := s.sessions.open(at, "oidc", id.Expires)
	s.setCookie(w, r, s.cookieName(r), cookie, 0)
	s.o.Logger.Info("console: signed in", "tenant", id.Tenant, "principal", id.Principal, "method", "oidc")
	http.Redirect(w, r, orOverview(pl.next), http.StatusSeeOther)
}

// jwtIssuer is the "iss" of a JWT whose signature was verified already
// ("" when it has none).
func jwtIssuer(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		Iss string `json:"iss"`
	}
	if json.Unmarshal(b, &c) != nil {
		return ""
	}
	return c.Iss
}

// clip bounds what a provider or a URL puts in the log (an error of
// go-oidc or oauth2 may quote a whole response body).
func clip(s string) string {
	const max = 300
	if len(s) > max {
		return strings.ToValidUTF8(s[:max], "") + "…"
	}
	return s
}

// PendingSignIns is how many sign-ins with the identity provider were
// started and have not come back (nor expired).
func (s *Server) PendingSignIns() int {
	if s.oidc == nil {
		return 0
	}
	return s.oidc.pending.len()
}
