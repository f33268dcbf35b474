package mcptool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
)

// TokenExchange configures an RFC 8693 token exchange for an HTTP
// upstream: the subject token is the request's signed assertion (token
// type TokenTypeJWT), and the access token the security token service
// (STS) issues is sent to the upstream as "Authorization: Bearer".
type TokenExchange struct {
	TokenURL     string // the STS's token endpoint
	ClientID     string
	ClientSecret string // sent in the request body (client_secret_post)
	// Audience and Resource name the upstream to the STS (absolute URIs).
	Audience           string
	Resource           string
	Scope              []string
	RequestedTokenType string
}

// Token types (RFC 8693 §3).
const (
	TokenTypeJWT         = "urn:ietf:params:oauth:token-type:jwt"
	TokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
)

// Bounds of the token exchange.
const (
	// MaxCachedTokens bounds the exchanged tokens one upstream keeps.
	MaxCachedTokens = 4096
	// TokenRefreshMargin: a cached token is exchanged again this long
	// before it expires, so that it is still valid when the upstream
	// checks it.
	TokenRefreshMargin = 30 * time.Second
	// MaxTokenReuse bounds how long one exchanged token is reused,
	// whatever its lifetime.
	MaxTokenReuse = time.Hour
	// maxSTSResponseBytes bounds the token endpoint's response.
	maxSTSResponseBytes = 64 << 10
	// maxAccessTokenBytes bounds an issued token.
	maxAccessTokenBytes = 16 << 10
)

// ErrTokenExchange reports that the STS gave no usable token: the request
// was not sent to the upstream.
var ErrTokenExchange = errors.New("token exchange failed")

// subject is whom an exchanged token stands for: everything the subject
// token says about identity (tenant, principal, roles). The gateway's own
// requests (listing, notifications) are a subject of their own, which no
// caller can be.
type subject struct {
	gateway           bool
	tenant, principal string
	roles             string // sorted, quoted: unambiguous
}

func subjectOf(c upstreamv1.Claims, gateway bool) subject {
	if gateway {
		return subject{gateway: true}
	}
	roles := slices.Clone(c.Roles)
	slices.Sort(roles)
	return subject{tenant: c.Tenant, principal: c.Subject, roles: fmt.Sprintf("%q", roles)}
}

// issued is a cached token and until when it is reused.
type issued struct {
	token string
	until time.Time
}

// flight is one exchange in progress; callers for the same subject wait
// for it instead of asking the STS again.
type flight struct {
	done  chan struct{}
	token string
	err   error
}

// exchanger exchanges assertions for upstream tokens and caches them per
// subject. It is safe for concurrent use.
type exchanger struct {
	cfg       TokenExchange
	namespace string
	hc        *http.Client
	log       *slog.Logger

	mu      sync.Mutex
	cache   map[subject]issued
	flights map[subject]*flight
}

func newExchanger(cfg TokenExchange, namespace string, timeout time.Duration, log *slog.Logger) (*exchanger, error) {
	if cfg.TokenURL == "" || cfg.ClientID == "" || cfg.ClientSecret == "" || cfg.Audience == "" || cfg.Resource == "" || cfg.RequestedTokenType == "" {
		return nil, errors.New("token exchange: token url, client id and secret, audience, resource and requested token type are required")
	}
	if u, err := url.Parse(cfg.TokenURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, errors.New("token exchange: the token url must be an absolute http(s) URL")
	}
	tr := &http.Transport{
		Proxy:                  nil, // the configured endpoint is the peer
		DialContext:            (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConnsPerHost:    4,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    timeout,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &exchanger{
		cfg: cfg, namespace: namespace, log: log,
		hc: &http.Client{
			Transport: boundedTransport{next: tr, limit: maxSTSResponseBytes},
			Timeout:   timeout,
			// A redirect would carry the client secret elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		cache: map[subject]issued{}, flights: map[subject]*flight{},
	}, nil
}

// boundedTransport caps every response body.
type boundedTransport struct {
	next  http.RoundTripper
	limit int64
}

func (t boundedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	resp.Body = &capped{r: resp.Body, left: t.limit}
	return resp, nil
}

// token returns the upstream token for sub: a cached one, or one the STS
// issues for subjectToken (the assertion of the request at hand).
func (e *exchanger) token(ctx context.Context, sub subject, subjectToken string) (string, error) {
	now := time.Now()
	e.mu.Lock()
	if c, ok := e.cache[sub]; ok {
		if now.Before(c.until) {
			e.mu.Unlock()
			return c.token, nil
		}
		delete(e.cache, sub)
	}
	f := e.flights[sub]
	if f == nil {
		f = &flight{done: make(chan struct{})}
		e.flights[sub] = f
		// The exchange outlives a caller that gives up, so that others
		// waiting for the same subject still get its result; the
		// client's timeout bounds it.
		go e.run(f, sub, subjectToken)
	}
	e.mu.Unlock()
	select {
	case <-f.done:
		return f.token, f.err
	case <-ctx.Done():
		return "", fmt.Errorf("%w: %w", ErrTokenExchange, ctx.Err())
	}
}

func (e *exchanger) run(f *flight, sub subject, subjectToken string) {
	tok, until, err := e.exchange(context.Background(), subjectToken)
	e.mu.Lock()
	delete(e.flights, sub)
	if err == nil && !until.IsZero() {
		e.store(sub, issued{token: tok, until: until})
	}
	e.mu.Unlock()
	f.token, f.err = tok, err
	close(f.done)
}

// store caches a token, making room when the cache is full: first by
// dropping expired tokens, then the one that expires first. e.mu is held.
func (e *exchanger) store(sub subject, it issued) {
	if _, ok := e.cache[sub]; !ok && len(e.cache) >= MaxCachedTokens {
		now := time.Now()
		for k, c := range e.cache {
			if !now.Before(c.until) {
				delete(e.cache, k)
			}
		}
		if len(e.cache) >= MaxCachedTokens {
			var first subject
			var at time.Time
			for k, c := range e.cache {
				if at.IsZero() || c.until.Before(at) {
					first, at = k, c.until
				}
			}
			delete(e.cache, first)
		}
	}
	e.cache[sub] = it
}

// exchange asks the STS once. until is when the token stops being reused
// (zero: not cached — no expiry, or too close to it). Errors say only the
// status and the RFC 6749 error code; the STS's own text goes to the log.
func (e *exchanger) exchange(ctx context.Context, subjectToken string) (token string, until time.Time, err error) {
	t, err := oauthex.ExchangeToken(ctx, e.cfg.TokenURL, &oauthex.TokenExchangeRequest{
		RequestedTokenType: e.cfg.RequestedTokenType,
		Audience:           e.cfg.Audience,
		Resource:           e.cfg.Resource,
		Scope:              e.cfg.Scope,
		SubjectToken:       subjectToken,
		SubjectTokenType:   TokenTypeJWT,
	}, &oauthex.ClientCredentials{
		ClientID:         e.cfg.ClientID,
		ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: e.cfg.ClientSecret},
	}, e.hc)
	if err != nil {
		return "", time.Time{}, e.failed(err)
	}
	// RFC 8693 §2.2.1: "N_A" (or anything but Bearer) is not usable as an
	// access token.
	if !strings.EqualFold(t.TokenType, "bearer") {
		e.log.Warn("mcp token exchange: the issued token is not a Bearer token", "upstream", e.namespace, "token_type", capText(t.TokenType, 64))
		return "", time.Time{}, fmt.Errorf("%w: the issued token's type is not Bearer", ErrTokenExchange)
	}
	if !b64token(t.AccessToken) {
		e.log.Warn("mcp token exchange: the issued access token is not a valid bearer credential", "upstream", e.namespace, "bytes", len(t.AccessToken))
		return "", time.Time{}, fmt.Errorf("%w: the issued access token is not a valid bearer credential", ErrTokenExchange)
	}
	if !t.Expiry.IsZero() {
		now := time.Now()
		until = t.Expiry.Add(-TokenRefreshMargin)
		if limit := now.Add(MaxTokenReuse); until.After(limit) {
			until = limit
		}
		if !until.After(now) {
			until = time.Time{}
		}
	}
	return t.AccessToken, until, nil
}

// failed logs why an exchange failed and returns an error without the
// STS's text.
func (e *exchanger) failed(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		e.log.Warn("mcp token exchange refused", "upstream", e.namespace, "status", status,
			"error", capText(re.ErrorCode, 64), "error_description", capText(re.ErrorDescription, 256))
		code := ""
		if oauthErrorCode(re.ErrorCode) {
			code = " " + re.ErrorCode
		}
		return fmt.Errorf("%w: the token endpoint answered %d%s", ErrTokenExchange, status, code)
	}
	e.log.Warn("mcp token exchange failed", "upstream", e.namespace, "err", err)
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%w: the token endpoint could not be reached", ErrTokenExchange)
	}
	return fmt.Errorf("%w: the token endpoint's answer is not usable", ErrTokenExchange)
}

// oauthErrorCode reports whether s looks like an RFC 6749 §5.2 error code.
func oauthErrorCode(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}

// b64token reports whether s is an RFC 6750 §2.1 b64token of bounded
// length: safe to send as "Authorization: Bearer s".
func b64token(s string) bool {
	if s == "" || len(s) > maxAccessTokenBytes {
		return false
	}
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("-._~+/", c) >= 0:
		default:
			return false
		}
	}
	return true
}
