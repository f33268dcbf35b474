package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/golang-jwt/jwt/v5"

	upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
)

// AssertionHeader is the request header that carries the gateway's
// assertion (upstreamv1.AssertionHeader).
const AssertionHeader = upstreamv1.AssertionHeader

// DefaultIssuer is the gateway's default "iss" (auth.assertion.issuer;
// upstreamv1.DefaultIssuer).
const DefaultIssuer = upstreamv1.DefaultIssuer

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
	// fetched when the Verifier is made (in the background: Verify waits
	// for that first fetch, and a failed one is retried after 1s, 2s, …
	// up to UnknownKeyRefetch), again when an assertion names a key the
	// set does not hold (a rotation, or a gateway that was down at start;
	// at most once per UnknownKeyRefetch), and every RefreshInterval.
	// Close the Verifier to stop refreshing.
	JWKSURL string
	// JWKS is a fixed key set, for tests and services that ship keys.
	// Either way only Ed25519 keys are used; keys of other types are left
	// out.
	JWKS []byte
	// Audience is the tool's name as declared in the gateway's config;
	// required.
	Audience string
	// Issuer is the expected "iss"; default DefaultIssuer.
	Issuer string
	// Leeway tolerates clock skew; default 5s.
	Leeway time.Duration
	// HTTPClient fetches JWKSURL; default a client with a 10s timeout
	// that follows at most 5 redirects, never from https to http. Either
	// way a key set longer than MaxJWKSBytes is refused.
	HTTPClient *http.Client
	// RefreshInterval bounds how long fetched keys are trusted; default
	// 5m.
	RefreshInterval time.Duration
	// UnknownKeyRefetch is the shortest time between two fetches caused
	// by unknown key ids, so that a flood of forged kids cannot turn the
	// service into a JWKS hammer; default 10s.
	UnknownKeyRefetch time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Verifier checks assertions. It is safe for concurrent use.
type Verifier struct {
	o    Options
	keys *keySet
}

// minUnknownKeyRefetch is UnknownKeyRefetch's default.
const minUnknownKeyRefetch = 10 * time.Second

// NewVerifier returns a Verifier. A fixed JWKS is parsed here; a JWKSURL
// starts loading.
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
	if o.RefreshInterval <= 0 {
		o.RefreshInterval = 5 * time.Minute
	}
	if o.UnknownKeyRefetch <= 0 {
		o.UnknownKeyRefetch = minUnknownKeyRefetch
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	v := &Verifier{o: o}
	var err error
	if o.JWKS != nil {
		v.keys, err = staticKeys(o.JWKS)
	} else {
		v.keys, err = remoteKeys(o.JWKSURL, o.HTTPClient, o.RefreshInterval, o.UnknownKeyRefetch)
	}
	if err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	return v, nil
}

// Close stops refreshing a JWKSURL's keys. It is safe to call more than
// once, and on a Verifier of a fixed JWKS.
func (v *Verifier) Close() { v.keys.Close() }

// Verify checks token (the AssertionHeader value) and that it was issued
// for exactly body, and returns the identity it asserts.
func (v *Verifier) Verify(ctx context.Context, token string, body []byte) (*Identity, error) {
	if token == "" {
		return nil, fmt.Errorf("%w: no %s header", ErrInvalidAssertion, AssertionHeader)
	}
	// Duplicate members and crit are refused before any key is looked up
	// (golang-jwt decodes with encoding/json, which keeps the last of
	// duplicate members and ignores crit).
	if err := checkCompact(token); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidAssertion, err)
	}
	var c upstreamv1.Claims
	_, err := jwt.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		h, named := t.Header["kid"]
		kid, ok := h.(string)
		if named && !ok {
			return nil, fmt.Errorf("%w: kid is not a string", errUnknownKey)
		}
		return v.keys.key(ctx, kid, named)
	},
		jwt.WithValidMethods([]string{upstreamv1.Algorithm}),
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
	if c.ArgsDigest != upstreamv1.ArgsDigest(body) {
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
