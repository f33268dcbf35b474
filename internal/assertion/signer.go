// Package assertion signs the identity assertions the gateway sends with
// every upstream tool call: short-lived EdDSA JWTs naming the verified
// caller, the call and the digest of exactly what was decided, so that an
// upstream service takes the principal from trusted context and never from
// a model-supplied field. It also publishes the verification keys as a
// JWKS (GET /.well-known/jwks.json).
package assertion

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/golang-jwt/jwt/v5"
)

// Header is the HTTP request header that carries the assertion.
const Header = "Toolgate-Assertion"

// Claims are what one assertion says about one call.
type Claims struct {
	Audience      string   // the tool's name
	Subject       string   // the verified principal
	Tenant        string   // the caller's tenant
	Roles         []string // the caller's roles
	CallID        string
	SessionID     string // "" when the call named no session
	RequestDigest string // digest of the request document policy decided on
	ArgsDigest    string // "sha256:" + hex of the exact request body sent
}

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

// Sign returns a compact JWT for c, valid from now for the signer's TTL.
func (s *Signer) Sign(c Claims) (string, error) {
	now := s.now()
	var jti [16]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", fmt.Errorf("assertion: %w", err)
	}
	roles := c.Roles
	if roles == nil {
		roles = []string{}
	}
	claims := jwt.MapClaims{
		"iss":            s.issuer,
		"aud":            c.Audience,
		"sub":            c.Subject,
		"tenant":         c.Tenant,
		"roles":          roles,
		"call_id":        c.CallID,
		"request_digest": c.RequestDigest,
		"args_digest":    c.ArgsDigest,
		"iat":            now.Unix(),
		"nbf":            now.Unix(),
		"exp":            now.Add(s.ttl).Unix(),
		"jti":            hex.EncodeToString(jti[:]),
	}
	if c.SessionID != "" {
		claims["session_id"] = c.SessionID
	}
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, claims)
	t.Header["kid"] = s.active.kid
	return t.SignedString(s.active.priv)
}

type jwk struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
}

func encodeJWKS(keys []key) ([]byte, error) {
	set := struct {
		Keys []jwk `json:"keys"`
	}{}
	for _, k := range keys {
		set.Keys = append(set.Keys, jwk{
			Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(k.pub),
			Kid: k.kid, Alg: "EdDSA", Use: "sig",
		})
	}
	return json.Marshal(set)
}
