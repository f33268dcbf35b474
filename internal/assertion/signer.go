// Package assertion signs the identity assertions the gateway sends with
// every upstream tool call: short-lived EdDSA JWTs naming the verified
// caller, the call and the digest of exactly what was decided, so that an
// upstream service takes the principal from trusted context and never from
// a model-supplied field. It also publishes the verification keys as a
// JWKS (GET /.well-known/jwks.json). The wire forms (claims, header,
// keys) are api/upstream/v1's.
package assertion

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/golang-jwt/jwt/v5"

	upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
)

// Options configure a Signer.
type Options struct {
	Issuer            string        // "iss"
	TTL               time.Duration // lifetime of each assertion
	SigningKeyFile    string        // Ed25519 PKCS#8 PEM; must exist (see EnsureKey)
	PublishedKeyFiles []string      // previous keys, published for verification only
	Now               func() time.Time
}

// Signer signs assertions with the active key. It is safe for concurrent
// use.
type Signer struct {
	issuer string
	ttl    time.Duration
	active key
	jwks   []byte
	now    func() time.Time
}

// New loads the keys of o.
func New(o Options) (*Signer, error) {
	if o.Issuer == "" || o.TTL <= 0 {
		return nil, errors.New("assertion: issuer and a positive ttl are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	active, err := readKey(o.SigningKeyFile)
	if err != nil {
		return nil, err
	}
	if active.priv == nil {
		return nil, fmt.Errorf("assertion key %s: the signing key must be a private key", o.SigningKeyFile)
	}
	keys := []key{active}
	seen := map[string]bool{active.kid: true}
	for _, f := range o.PublishedKeyFiles {
		k, err := readKey(f)
		if err != nil {
			return nil, err
		}
		if !seen[k.kid] {
			seen[k.kid] = true
			keys = append(keys, k)
		}
	}
	jwks, err := encodeJWKS(keys)
	if err != nil {
		return nil, err
	}
	return &Signer{issuer: o.Issuer, ttl: o.TTL, active: active, jwks: jwks, now: o.Now}, nil
}

// KeyID is the kid of the active signing key.
func (s *Signer) KeyID() string { return s.active.kid }

// Issuer is the "iss" of every assertion.
func (s *Signer) Issuer() string { return s.issuer }

// JWKS returns the published key set: the active key first, then the
// previous ones. The slice must not be modified.
func (s *Signer) JWKS() []byte { return s.jwks }

// Sign returns a compact JWT of c, valid from now for the signer's TTL:
// the signer sets iss, iat, nbf, exp and a fresh jti, and sends roles as
// [] when c has none.
func (s *Signer) Sign(c upstreamv1.Claims) (string, error) {
	now := s.now()
	var jti [16]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", fmt.Errorf("assertion: %w", err)
	}
	if c.Roles == nil {
		c.Roles = []string{}
	}
	c.Issuer = s.issuer
	c.IssuedAt = jwt.NewNumericDate(now)
	c.NotBefore = c.IssuedAt
	c.ExpiresAt = jwt.NewNumericDate(now.Add(s.ttl))
	c.ID = hex.EncodeToString(jti[:])
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, &c)
	t.Header["kid"] = s.active.kid
	return t.SignedString(s.active.priv)
}

func encodeJWKS(keys []key) ([]byte, error) {
	set := upstreamv1.JWKS{Keys: make([]upstreamv1.JWK, 0, len(keys))}
	for _, k := range keys {
		set.Keys = append(set.Keys, upstreamv1.NewJWK(k.kid, k.pub))
	}
	return json.Marshal(set)
}
