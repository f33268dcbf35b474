// Package upstreamtest issues Toolgate assertions for testing a tool
// service without a gateway: an Issuer holds a fresh Ed25519 key, serves
// its JWKS, and builds requests shaped exactly like the gateway's.
package upstreamtest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/golang-jwt/jwt/v5"

	upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
	"github.com/toolgate/toolgate/sdk/upstream"
)

// Issuer signs assertions like a gateway does.
type Issuer struct {
	// Name is the "iss" it signs with; default upstream.DefaultIssuer.
	Name string
	// Now is the clock of IssuedAt and Expires defaults; default time.Now.
	Now  func() time.Time
	kid  string
	priv ed25519.PrivateKey
}

// NewIssuer returns an Issuer with a fresh key.
func NewIssuer() *Issuer {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	sum := sha256.Sum256(pub)
	return &Issuer{Name: upstream.DefaultIssuer, Now: time.Now, kid: hex.EncodeToString(sum[:8]), priv: priv}
}

// JWKS is the issuer's public key set, for upstream.Options.JWKS or to
// serve as the JWKSURL.
func (i *Issuer) JWKS() []byte {
	b, _ := json.Marshal(upstreamv1.JWKS{Keys: []upstreamv1.JWK{upstreamv1.NewJWK(i.kid, i.priv.Public().(ed25519.PublicKey))}})
	return b
}

// Sign returns an assertion for id and body. Zero fields get test
// defaults: ArgsDigest the digest of body, IssuedAt now, Expires a minute
// later, CallID, RequestDigest and Tenant placeholders.
func (i *Issuer) Sign(id upstream.Identity, body []byte) string {
	now := i.Now()
	if id.IssuedAt.IsZero() {
		id.IssuedAt = now
	}
	if id.Expires.IsZero() {
		id.Expires = id.IssuedAt.Add(time.Minute)
	}
	if id.ArgsDigest == "" {
		id.ArgsDigest = upstreamv1.ArgsDigest(body)
	}
	if id.CallID == "" {
		id.CallID = "test-call"
	}
	if id.RequestDigest == "" {
		id.RequestDigest = upstreamv1.DigestPrefix + hex.EncodeToString(make([]byte, 32))
	}
	if id.Tenant == "" {
		id.Tenant = "test"
	}
	if id.Issuer == "" {
		id.Issuer = i.Name
	}
	roles := id.Roles
	if roles == nil {
		roles = []string{}
	}
	c := &upstreamv1.Claims{
		Issuer: id.Issuer, Audience: id.Audience, Subject: id.Subject, Tenant: id.Tenant, Roles: roles,
		CallID: id.CallID, SessionID: id.SessionID, RequestDigest: id.RequestDigest, ArgsDigest: id.ArgsDigest,
		IssuedAt:  jwt.NewNumericDate(id.IssuedAt),
		NotBefore: jwt.NewNumericDate(id.IssuedAt),
		ExpiresAt: jwt.NewNumericDate(id.Expires),
		ID:        id.ID,
	}
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
	t.Header["kid"] = i.kid
	s, err := t.SignedString(i.priv)
	if err != nil {
		panic(err) // an Ed25519 key always signs
	}
	return s
}

// Request returns a POST of args (marshalled as JSON) to url carrying an
// assertion for id, as the gateway would send it.
func (i *Issuer) Request(url string, id upstream.Identity, args any) *http.Request {
	body, err := json.Marshal(args, json.Deterministic(true))
	if err != nil {
		panic(err)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(upstream.AssertionHeader, i.Sign(id, body))
	return req
}
