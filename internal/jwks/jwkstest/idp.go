// Package jwkstest runs a local identity provider for tests: an
// httptest server on loopback that serves an OpenID Connect discovery
// document and a JWK Set whose keys a test rotates, counts the requests
// it gets, and signs tokens with its keys.
package jwkstest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// JWKSPath is where the IdP serves its key set.
const JWKSPath = "/protocol/openid-connect/certs"

// Key is a signing key of the IdP.
type Key struct {
	KID    string
	Method jwt.SigningMethod
	priv   crypto.Signer
}

// NewKey returns a fresh key for alg: "ES256" (fast), "RS256" (2048 bits)
// or "EdDSA".
func NewKey(kid, alg string) *Key {
	var (
		priv crypto.Signer
		err  error
		m    jwt.SigningMethod
	)
	switch alg {
	case "ES256":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		m = jwt.SigningMethodES256
	case "RS256":
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
		m = jwt.SigningMethodRS256
	case "EdDSA":
		_, priv, err = ed25519.GenerateKey(rand.Reader)
		m = jwt.SigningMethodEdDSA
	default:
		panic("jwkstest: unsupported alg " + alg)
	}
	if err != nil {
		panic(err)
	}
	return &Key{KID: kid, Method: m, priv: priv}
}

// JWK returns the public half of k as a JWK object ("use": "sig").
func (k *Key) JWK() map[string]any {
	b64 := base64.RawURLEncoding.EncodeToString
	m := map[string]any{"kid": k.KID, "use": "sig", "alg": k.Method.Alg()}
	switch pub := k.priv.Public().(type) {
	case *ecdsa.PublicKey:
		b, err := pub.Bytes()
		if err != nil {
			panic(err)
		}
		size := (len(b) - 1) / 2
		m["kty"], m["crv"], m["x"], m["y"] = "EC", "P-256", b64(b[1:1+size]), b64(b[1+size:])
	case *rsa.PublicKey:
		m["kty"], m["n"], m["e"] = "RSA", b64(pub.N.Bytes()), b64(big.NewInt(int64(pub.E)).Bytes())
	case ed25519.PublicKey:
		m["kty"], m["crv"], m["x"] = "OKP", "Ed25519", b64(pub)
	}
	return m
}

// Sign returns a compact JWT of claims signed by k, with k's kid.
func (k *Key) Sign(claims jwt.MapClaims) string {
	t := jwt.NewWithClaims(k.Method, claims)
	t.Header["kid"] = k.KID
	s, err := t.SignedString(k.priv)
	if err != nil {
		panic(err)
	}
	return s
}

// Private returns the private key, for tests that build tokens by hand.
func (k *Key) Private() crypto.Signer { return k.priv }

// IdP is a local identity provider.
type IdP struct {
	srv *httptest.Server

	mu              sync.Mutex
	published       []*Key
	discoveryIssuer string // "" answers with Issuer()
	jwksURI         string // "" answers with JWKSURL()
	status          int    // 0: 200
	delay           time.Duration

	discoveryHits atomic.Int64
	jwksHits      atomic.Int64
}

// New starts an IdP on loopback that publishes keys (none yet if empty),
// closed when the test ends.
func New(t testing.TB, keys ...*Key) *IdP {
	p := &IdP{published: keys}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET "+JWKSPath, p.jwks)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

// Issuer is the IdP's issuer identifier (its base URL).
func (p *IdP) Issuer() string { return p.srv.URL }

// JWKSURL is where its key set is served.
func (p *IdP) JWKSURL() string { return p.srv.URL + JWKSPath }

// Publish replaces the published key set: a rotation adds a key, a
// retirement leaves one out.
func (p *IdP) Publish(keys ...*Key) {
	p.mu.Lock()
	p.published = keys
	p.mu.Unlock()
}

// SetDiscoveryIssuer makes the discovery document name issuer instead of
// the IdP's own.
func (p *IdP) SetDiscoveryIssuer(issuer string) {
	p.mu.Lock()
	p.discoveryIssuer = issuer
	p.mu.Unlock()
}

// SetJWKSURI makes the discovery document name uri as jwks_uri.
func (p *IdP) SetJWKSURI(uri string) {
	p.mu.Lock()
	p.jwksURI = uri
	p.mu.Unlock()
}

// SetStatus makes every answer have status (0 or 200: healthy; 503: an
// IdP that is down).
func (p *IdP) SetStatus(status int) {
	p.mu.Lock()
	p.status = status
	p.mu.Unlock()
}

// SetDelay makes every answer wait d first (a slow provider).
func (p *IdP) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// DiscoveryFetches is how many discovery requests the IdP answered.
func (p *IdP) DiscoveryFetches() int64 { return p.discoveryHits.Load() }

// JWKSFetches is how many key set requests the IdP answered.
func (p *IdP) JWKSFetches() int64 { return p.jwksHits.Load() }

func (p *IdP) unhealthy(w http.ResponseWriter) bool {
	p.mu.Lock()
	st, delay := p.status, p.delay
	p.mu.Unlock()
	time.Sleep(delay)
	if st != 0 && st != http.StatusOK {
		http.Error(w, http.StatusText(st), st)
		return true
	}
	return false
}

func (p *IdP) discovery(w http.ResponseWriter, _ *http.Request) {
	p.discoveryHits.Add(1)
	if p.unhealthy(w) {
		return
	}
	p.mu.Lock()
	iss, uri := p.discoveryIssuer, p.jwksURI
	p.mu.Unlock()
	if iss == "" {
		iss = p.Issuer()
	}
	if uri == "" {
		uri = p.JWKSURL()
	}
	writeJSON(w, map[string]any{
		"issuer": iss, "jwks_uri": uri,
		"authorization_endpoint":                p.srv.URL + "/auth",
		"token_endpoint":                        p.srv.URL + "/token",
		"id_token_signing_alg_values_supported": []string{"RS256", "ES256", "EdDSA"},
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
	})
}

func (p *IdP) jwks(w http.ResponseWriter, _ *http.Request) {
	p.jwksHits.Add(1)
	if p.unhealthy(w) {
		return
	}
	p.mu.Lock()
	keys := make([]any, 0, len(p.published))
	for _, k := range p.published {
		keys = append(keys, k.JWK())
	}
	p.mu.Unlock()
	writeJSON(w, map[string]any{"keys": keys})
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}
