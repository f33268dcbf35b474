package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/jwks"
)

const (
	// maxTokenBytes bounds the work an unauthenticated caller can cause
	// (hashing, base64 and JSON decoding).
	maxTokenBytes = 8 << 10
)

// Authenticator verifies bearer credentials. Build it once with
// NewAuthenticator and Close it when done; Authenticate is safe for
// concurrent use.
type Authenticator struct {
	secret []byte    // HS256 key; nil when not configured
	keys   *jwks.Set // jwks_file, jwks_url or oidc_issuer; nil when none is configured
	remote bool      // keys come from an identity provider
	// idpIssuer is the "iss" that tokens verified by an OpenID Connect
	// provider's keys must carry (auth.jwt.oidc_issuer, which its discovery
	// document names); "" when none is configured.
	idpIssuer string
	methods   []string // JWS algorithms the configured keys verify
	parser    *jwt.Parser
	cache     *tokenCache // verified JWTs; nil disables
	now       func() time.Time
	leeway    time.Duration

	tenantClaim, rolesClaim, groupsClaim string

	apiKeys []apiKey
	tenants map[string]struct{}
}

// Option configures an Authenticator.
type Option func(*options)

type options struct {
	now       func() time.Time
	cacheSize int
	log       *slog.Logger
	client    *http.Client
}

// WithLogger sets where failed loads and refreshes of an identity
// provider's keys are logged (default: nowhere).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) { o.log = l }
}

// WithHTTPClient sets the client that fetches an identity provider's
// discovery document and keys (default jwks.NewClient()).
func WithHTTPClient(c *http.Client) Option {
	return func(o *options) { o.client = c }
}

// WithTokenCache sets how many verified JWTs are remembered (default
// 4096); 0 verifies every token on every request.
func WithTokenCache(entries int) Option {
	return func(o *options) { o.cacheSize = entries }
}

// WithClock sets the clock used for exp and nbf (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// NewAuthenticator builds an Authenticator from cfg. It reads
// the HS256 secret file and the JWKS file when they are configured (call
// EnsureHS256Secret first to create a dev secret), and fails if a key is
// unusable or no credential kind is configured.
//
// An identity provider (auth.jwt.jwks_url or oidc_issuer) never makes it
// fail or wait: its keys load in the background, and until they have,
// tokens that need them are refused (ReasonKeysNotLoaded) and KeyStatus
// says so. Close stops the refreshing.
func NewAuthenticator(cfg Config, opts ...Option) (_ *Authenticator, err error) {
	o := options{now: time.Now, cacheSize: defaultTokenCacheSize}
	for _, opt := range opts {
		opt(&o)
	}
	j := cfg.JWT
	a := &Authenticator{
		tenantClaim: orDefault(j.TenantClaim, DefaultTenantClaim),
		rolesClaim:  orDefault(j.RolesClaim, DefaultRolesClaim),
		groupsClaim: orDefault(j.GroupsClaim, DefaultGroupsClaim),
		tenants:     make(map[string]struct{}, len(cfg.Tenants)),
		cache:       newTokenCache(o.cacheSize),
		now:         o.now,
		leeway:      j.Leeway,
	}
	for _, name := range cfg.Tenants {
		a.tenants[name] = struct{}{}
	}
	defer func() {
		if err != nil {
			a.Close() // a remote key set stops loading
		}
	}()

	if j.HS256SecretFile != "" {
		secret, err := ReadHS256Secret(j.HS256SecretFile)
		if err != nil {
			return nil, err
		}
		a.secret = secret
		a.methods = append(a.methods, jwt.SigningMethodHS256.Alg())
	}
	switch {
	case j.JWKSFile != "":
		ks, err := jwks.LoadFile(j.JWKSFile)
		if err != nil {
			return nil, err
		}
		a.keys = ks
	case j.JWKSURL != "" || j.OIDCIssuer != "":
		ks, err := jwks.NewRemote(jwks.RemoteOptions{
			URL: j.JWKSURL, Issuer: j.OIDCIssuer,
			Refresh: j.JWKSRefresh, UnknownKIDRefresh: j.JWKSUnknownKIDRefresh,
			Client: o.client, Logger: o.log,
		})
		if err != nil {
			return nil, err
		}
		a.keys, a.remote, a.idpIssuer = ks, true, j.OIDCIssuer
	}
	if a.keys != nil {
		a.methods = append(a.methods, a.keys.Algorithms()...)
	}
	for i, k := range cfg.APIKeys {
		d, err := hex.DecodeString(k.SHA256)
		if err != nil || len(d) != sha256.Size {
			return nil, fmt.Errorf("auth.api_keys[%d]: sha256 is not a hex SHA-256 digest", i)
		}
		ak := apiKey{id: k.ID, tenant: k.Tenant, roles: k.Roles, groups: k.Groups}
		copy(ak.digest[:], d)
		a.apiKeys = append(a.apiKeys, ak)
	}
	if len(a.methods) == 0 && len(a.apiKeys) == 0 {
		return nil, errors.New("auth: no credentials configured")
	}

	popts := []jwt.ParserOption{
		// The allow-list is what rejects "none" and HS256-signed tokens
		// when only asymmetric keys are configured; keyFunc then checks
		// the algorithm against the individual key.
		jwt.WithValidMethods(append([]string{}, a.methods...)),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(j.Leeway),
		jwt.WithTimeFunc(o.now),
		jwt.WithStrictDecoding(),
	}
	if j.Issuer != "" {
		popts = append(popts, jwt.WithIssuer(j.Issuer))
	}
	if j.Audience != "" {
		popts = append(popts, jwt.WithAudience(j.Audience))
	}
	a.parser = jwt.NewParser(popts...)
	return a, nil
}

// Close stops refreshing an identity provider's keys. It is safe to call
// more than once.
func (a *Authenticator) Close() {
	if a.keys != nil {
		a.keys.Close()
	}
}

// KeyStatus reports, for readiness checks, whether the identity provider's
// keys have loaded: "ok", "keys not loaded", or "" when no identity
// provider (auth.jwt.jwks_url, oidc_issuer) is configured.
func (a *Authenticator) KeyStatus() string {
	switch {
	case !a.remote:
		return ""
	case a.keys.Loaded():
		return "ok"
	default:
		return "keys not loaded"
	}
}

// Authenticate verifies the request's Authorization header. Every failure
// is an *Error matching ErrUnauthenticated. A token whose kid the
// identity provider's set does not hold may fetch the set again
// (rate-limited) within the request's context.
func (a *Authenticator) Authenticate(r *http.Request) (*identity.Identity, error) {
	values := r.Header.Values("Authorization")
	switch len(values) {
	case 0:
		return nil, refuse(ReasonMissingCredentials, nil)
	case 1:
		return a.authenticateHeader(r.Context(), values[0])
	default:
		return nil, refuse(ReasonMalformedHeader, errors.New("several Authorization headers"))
	}
}

// AuthenticateHeader verifies an Authorization header value, which must be
// exactly "Bearer <token>" (scheme case-insensitive, one space). A token of
// three dot-separated segments is a JWT; anything else is an API key.
func (a *Authenticator) AuthenticateHeader(value string) (*identity.Identity, error) {
	return a.authenticateHeader(context.Background(), value)
}

func (a *Authenticator) authenticateHeader(ctx context.Context, value string) (*identity.Identity, error) {
	if value == "" {
		return nil, refuse(ReasonMissingCredentials, nil)
	}
	token, err := bearerToken(value)
	if err != nil {
		return nil, err
	}
	if strings.Count(token, ".") == 2 {
		return a.verifyJWT(ctx, token)
	}
	return a.verifyAPIKey(token)
}

// bearerToken extracts the token of an RFC 6750 "Bearer" credential.
func bearerToken(h string) (string, error) {
	const scheme = "Bearer "
	if len(h) < len(scheme) || !strings.EqualFold(h[:len(scheme)], scheme) {
		return "", refuse(ReasonMalformedHeader, errors.New("not a Bearer credential"))
	}
	tok := h[len(scheme):]
	switch {
	case tok == "":
		return "", refuse(ReasonMalformedHeader, errors.New("empty token"))
	case len(tok) > maxTokenBytes:
		return "", refuse(ReasonMalformedHeader, errors.New("token too long"))
	case !isB64Token(tok):
		return "", refuse(ReasonMalformedHeader, errors.New("token has characters outside the b64token syntax"))
	}
	return tok, nil
}

// isB64Token reports whether s matches RFC 6750's
// b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/') {
			break
		}
	}
	if i == 0 {
		return false
	}
	for ; i < len(s); i++ {
		if s[i] != '=' {
			return false
		}
	}
	return true
}
