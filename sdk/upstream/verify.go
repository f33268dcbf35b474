package upstream

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/golang-jwt/jwt/v5"
)

// AssertionHeader is the request header that carries the gateway's
// assertion.
const AssertionHeader = "Toolgate-Assertion"

// DefaultIssuer is the gateway's default "iss" (auth.assertion.issuer).
const DefaultIssuer = "toolgate"

// Errors of Verify. Every failure wraps ErrInvalidAssertion.
var (
	// ErrInvalidAssertion: missing, malformed, unsigned, wrongly signed,
	// expired, or meant for another tool or issuer.
	ErrInvalidAssertion = errors.New("invalid toolgate assertion")
	// ErrBodyMismatch: the assertion is valid but was issued for another
	// request body.
	ErrBodyMismatch = fmt.Errorf("%w: issued for another request body", ErrInvalidAssertion)
)

// Identity is what a verified assertion says about a call.
type Identity struct {
	Subject       string   // the caller, as the gateway authenticated it
	Tenant        string   // the caller's tenant
	Roles         []string // the caller's roles
	CallID        string   // the gateway's call id (an idempotency key)
	SessionID     string   // "" when the call named no session
	RequestDigest string   // digest of the request document policy decided on
	ArgsDigest    string   // "sha256:" + hex of the request body
	Issuer        string
	Audience      string // the tool's name
	ID            string // "jti", unique per assertion
	IssuedAt      time.Time
	Expires       time.Time
}

// HasRole reports whether the caller holds role.
func (id *Identity) HasRole(role string) bool {
	for _, r := range id.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// Options configure a Verifier. Exactly one of JWKSURL and JWKS is set.
type Options struct {
	// JWKSURL is the gateway's key set, GET /.well-known/jwks.json. It is
	// fetched on first use, again when an assertion names an unknown key
	// (a rotation), and at least every RefreshInterval.
	JWKSURL string
	// JWKS is a fixed key set, for tests and services that ship keys.
	JWKS []byte
	// Audience is the tool's name as declared in the gateway's config;
	// required.
	Audience string
	// Issuer is the expected "iss"; default DefaultIssuer.
	Issuer string
	// Leeway tolerates clock skew; default 5s.
	Leeway time.Duration
	// HTTPClient fetches JWKSURL; default a client with a 10s timeout.
	HTTPClient *http.Client
	// RefreshInterval bounds how long fetched keys are trusted; default
	// 5m. Unknown keys trigger a fetch at most every 10s.
	RefreshInterval time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Verifier checks assertions. It is safe for concurrent use.
type Verifier struct {
	o       Options
	mu      sync.Mutex
	keys    map[string]ed25519.PublicKey
	fetched time.Time // zero: never
}

// minUnknownKeyRefetch rate-limits fetches caused by unknown key ids, so a
// flood of forged kids cannot turn the service into a JWKS hammer.
const minUnknownKeyRefetch = 10 * time.Second

// NewVerifier returns a Verifier. A fixed JWKS is parsed here.
func NewVerifier(o Options) (*Verifier, error) {
	if o.Audience == "" {
		return nil, errors.New("upstream: Options.Audience (the tool's name) is required")
	}
	if (o.JWKSURL == "") == (o.JWKS == nil) {
		return nil, errors.New("upstream: set exactly one of Options.JWKSURL and Options.JWKS")
	}
	if o.Issuer == "" {
		o.Issuer = DefaultIssuer
	}
	if o.Leeway == 0 {
		o.Leeway = 5 * time.Second
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if o.RefreshInterval <= 0 {
		o.RefreshInterval = 5 * time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	v := &Verifier{o: o}
	if o.JWKS != nil {
		keys, err := parseJWKS(o.JWKS)
		if err != nil {
			return nil, err
		}
		v.keys = keys
	}
	return v, nil
}

type claims struct {
	jwt.RegisteredClaims
	Tenant        string   `json:"tenant"`
	Roles         []string `json:"roles"`
	CallID        string   `json:"call_id"`
	SessionID     string   `json:"session_id"`
	RequestDigest string   `json:"request_digest"`
	ArgsDigest    string   `json:"args_digest"`
}

// Verify checks token (the AssertionHeader value) and that it was issued
// for exactly body, and returns the identity it asserts.
func (v *Verifier) Verify(ctx context.Context, token string, body []byte) (*Identity, error) {
	if token == "" {
		return nil, fmt.Errorf("%w: no %s header", ErrInvalidAssertion, AssertionHeader)
	}
	var c claims
	_, err := jwt.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		return v.key(ctx, kid)
	},
		jwt.WithValidMethods([]string{"EdDSA"}),
		jwt.WithIssuer(v.o.Issuer),
		jwt.WithAudience(v.o.Audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(v.o.Leeway),
		jwt.WithTimeFunc(v.o.Now),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidAssertion, err)
	}
	if c.Subject == "" || c.Tenant == "" || c.CallID == "" || c.RequestDigest == "" || c.ArgsDigest == "" {
		return nil, fmt.Errorf("%w: a required claim is missing", ErrInvalidAssertion)
	}
	sum := sha256.Sum256(body)
	if c.ArgsDigest != "sha256:"+hex.EncodeToString(sum[:]) {
		return nil, ErrBodyMismatch
	}
	id := &Identity{
		Subject: c.Subject, Tenant: c.Tenant, Roles: c.Roles, CallID: c.CallID, SessionID: c.SessionID,
		RequestDigest: c.RequestDigest, ArgsDigest: c.ArgsDigest, Issuer: c.Issuer, Audience: v.o.Audience, ID: c.ID,
	}
	if c.IssuedAt != nil {
		id.IssuedAt = c.IssuedAt.Time
	}
	if c.ExpiresAt != nil {
		id.Expires = c.ExpiresAt.Time
	}
	return id, nil
}

// key returns the public key named kid, fetching the key set when it is
// stale or does not know kid.
func (v *Verifier) key(ctx context.Context, kid string) (ed25519.PublicKey, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.o.JWKSURL != "" {
		now := v.o.Now()
		_, known := v.keys[kid]
		stale := v.fetched.IsZero() || now.Sub(v.fetched) > v.o.RefreshInterval
		if stale || !known && now.Sub(v.fetched) > minUnknownKeyRefetch {
			keys, err := v.fetch(ctx)
			if err != nil && v.keys == nil {
				return nil, err
			}
			if err == nil {
				v.keys = keys
			}
			v.fetched = now
		}
	}
	k, ok := v.keys[kid]
	if !ok {
		return nil, fmt.Errorf("unknown key id %q", kid)
	}
	return k, nil
}

func (v *Verifier) fetch(ctx context.Context) (map[string]ed25519.PublicKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.o.JWKSURL, nil)
	if err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	resp, err := v.o.HTTPClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("jwks: status %d", resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	return parseJWKS(b)
}

// parseJWKS keeps the Ed25519 signing keys of a JWK set.
func parseJWKS(b []byte) (map[string]ed25519.PublicKey, error) {
	var set struct {
		Keys []struct {
			Kty string `json:"kty"`
			Crv string `json:"crv"`
			X   string `json:"x"`
			Kid string `json:"kid"`
			Use string `json:"use"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	keys := map[string]ed25519.PublicKey{}
	for _, k := range set.Keys {
		if k.Kty != "OKP" || k.Crv != "Ed25519" || k.Kid == "" || (k.Use != "" && k.Use != "sig") {
			continue
		}
		x, err := base64.RawURLEncoding.DecodeString(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("jwks: key %q is not an Ed25519 public key", k.Kid)
		}
		keys[k.Kid] = ed25519.PublicKey(x)
	}
	return keys, nil
}
