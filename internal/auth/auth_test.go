package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/internal/identity"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const (
	testIssuer   = "https://issuer.test"
	testAudience = "toolgate"
	testAPIKey   = "tg_test_3f9a1c0d7e2b4a6c8e0f1a2b3c4d5e6f"
)

// testKeys are generated once: RSA key generation is slow.
var testKeys = sync.OnceValue(func() keys {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	_, edk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return keys{rsa: rk, ec: ek, ed: edk}
})

type keys struct {
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
	ed  ed25519.PrivateKey
}

func b64u(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jwksJSON publishes the public halves of k under kids "rsa-1", "ec-1", "ed-1".
func jwksJSON(t testing.TB, k keys) []byte {
	t.Helper()
	point, err := k.ec.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	size := (len(point) - 1) / 2
	doc := map[string]any{"keys": []map[string]any{
		{"kty": "RSA", "kid": "rsa-1", "use": "sig", "n": b64u(k.rsa.N.Bytes()), "e": b64u(big.NewInt(int64(k.rsa.E)).Bytes())},
		{"kty": "EC", "kid": "ec-1", "crv": "P-256", "alg": "ES256", "x": b64u(point[1 : 1+size]), "y": b64u(point[1+size:])},
		{"kty": "OKP", "kid": "ed-1", "crv": "Ed25519", "x": b64u(k.ed.Public().(ed25519.PublicKey))},
	}}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

type setup struct {
	secret []byte
	cfg    *Config
}

// newSetup writes an HS256 secret and a JWKS into a temp dir and returns a
// config using both plus one API key, for tenants acme and globex.
func newSetup(t testing.TB) setup {
	t.Helper()
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	if _, err := EnsureHS256Secret(secretFile); err != nil {
		t.Fatal(err)
	}
	secret, err := ReadHS256Secret(secretFile)
	if err != nil {
		t.Fatal(err)
	}
	jwksFile := filepath.Join(dir, "jwks.json")
	if err := os.WriteFile(jwksFile, jwksJSON(t, testKeys()), 0o600); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(testAPIKey))
	cfg := &Config{
		JWT: JWT{
			HS256SecretFile: secretFile,
			JWKSFile:        jwksFile,
			Issuer:          testIssuer,
			Audience:        testAudience,
			TenantClaim:     "tenant",
			RolesClaim:      "roles",
			GroupsClaim:     "groups",
			Leeway:          30 * time.Second,
		},
		APIKeys: []APIKey{{
			ID: "ci-bot", SHA256: hex.EncodeToString(sum[:]), Tenant: "acme",
			Roles: []string{"agent"}, Groups: []string{"bots"},
		}},
		Tenants: []string{"acme", "globex"},
	}
	return setup{secret: secret, cfg: cfg}
}

func (s setup) authenticator(t testing.TB, edit func(*Config)) *Authenticator {
	t.Helper()
	cfg := *s.cfg
	if edit != nil {
		edit(&cfg)
	}
	a, err := NewAuthenticator(cfg, WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func baseClaims() jwt.MapClaims {
	return jwt.MapClaims{
		"iss":    testIssuer,
		"aud":    testAudience,
		"sub":    "alice",
		"tenant": "acme",
		"roles":  []string{"agent"},
		"azp":    "platform-x",
		"team":   "blue",
		"iat":    now.Unix(),
		"nbf":    now.Add(-time.Minute).Unix(),
		"exp":    now.Add(time.Hour).Unix(),
	}
}

func sign(t testing.TB, m jwt.SigningMethod, kid string, claims jwt.MapClaims, key any) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func with(edit func(jwt.MapClaims)) jwt.MapClaims {
	c := baseClaims()
	edit(c)
	return c
}

func wantReason(t *testing.T, err error, want Reason) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want refusal %q", want)
	}
	if !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("error %v does not match ErrUnauthenticated", err)
	}
	var ae *Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v is not an *auth.Error", err)
	}
	if ae.Reason != want {
		t.Errorf("reason = %q, want %q (%v)", ae.Reason, want, err)
	}
}

func TestJWTVerification(t *testing.T) {
	s := newSetup(t)
	k := testKeys()
	full := s.authenticator(t, nil)
	jwksOnly := s.authenticator(t, func(c *Config) { c.JWT.HS256SecretFile = "" })
	rsaPubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: must(x509.MarshalPKIXPublicKey(&k.rsa.PublicKey))})

	tests := []struct {
		name  string
		a     *Authenticator
		token string
		want  Reason // "" means accepted
	}{
		{"HS256 valid", full, sign(t, jwt.SigningMethodHS256, "", baseClaims(), s.secret), ""},
		{"RS256 valid", full, sign(t, jwt.SigningMethodRS256, "rsa-1", baseClaims(), k.rsa), ""},
		{"PS256 valid", full, sign(t, jwt.SigningMethodPS256, "rsa-1", baseClaims(), k.rsa), ""},
		{"ES256 valid", full, sign(t, jwt.SigningMethodES256, "ec-1", baseClaims(), k.ec), ""},
		{"EdDSA valid", full, sign(t, jwt.SigningMethodEdDSA, "ed-1", baseClaims(), k.ed), ""},
		{"expired within leeway is accepted", full,
			sign(t, jwt.SigningMethodHS256, "", with(func(c jwt.MapClaims) { c["exp"] = now.Add(-10 * time.Second).Unix() }), s.secret), ""},
		{"expired", full,
			sign(t, jwt.SigningMethodHS256, "", with(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Hour).Unix() }), s.secret), ReasonExpired},
		{"nbf in the future", full,
			sign(t, jwt.SigningMethodHS256, "", with(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Hour).Unix() }), s.secret), ReasonNotYetValid},
		{"exp missing", full,
			sign(t, jwt.SigningMethodHS256, "", with(func(c jwt.MapClaims) { delete(c, "exp") }), s.secret), ReasonMissingClaim},
		{"exp of the wrong type", full,
			sign(t, jwt.SigningMethodHS256, "", with(func(c jwt.MapClaims) { c["exp"] = "tomorrow" }), s.secret), ReasonBadClaims},
		{"wrong secret", full,
			sign(t, jwt.SigningMethodHS256, "", baseClaims(), []byte(strings.Repeat("x", 32))), ReasonBadSignature},
		{"alg none", full,
			sign(t, jwt.SigningMethodNone, "", baseClaims(), jwt.UnsafeAllowNoneSignatureType), ReasonAlgorithm},
		{"HS256 against a JWKS-only config", jwksOnly,
			sign(t, jwt.SigningMethodHS256, "rsa-1", baseClaims(), s.secret), ReasonAlgorithm},
		{"HS256 keyed with the RSA public key (alg confusion)", jwksOnly,
			sign(t, jwt.SigningMethodHS256, "rsa-1", baseClaims(), rsaPubPEM), ReasonAlgorithm},
		{"alg that does not fit the kid's key", full,
			sign(t, jwt.SigningMethodRS256, "ec-1", baseClaims(), k.rsa), ReasonAlgorithm},
		{"ES384 under a P-256 kid", full,
			sign(t, jwt.SigningMethodES384, "ec-1", baseClaims(), must(ecdsa.GenerateKey(elliptic.P384(), rand.Reader))), ReasonAlgorithm},
		{"wrong kid", full, sign(t, jwt.SigningMethodRS256, "rsa-2", baseClaims(), k.rsa), ReasonUnknownKey},
		{"no kid with several keys", full, sign(t, jwt.SigningMethodRS256, "", baseClaims(), k.rsa), ReasonUnknownKey},
		{"signed by another RSA key under a known kid", full,
			sign(t, jwt.SigningMethodRS256, "rsa-1", baseClaims(), must(rsa.GenerateKey(rand.Reader, 2048))), ReasonBadSignature},
		{"issuer mismatch", full,
			sign(t, jwt.SigningMethodHS256, "", with(func(c jwt.MapClaims) { c["iss"] = "https://evil.test" }), s.secret), ReasonBadIssuer},
		{"issuer missing when configured", full,
			sign(t, jwt.SigningMethodHS256, "", with(func(c jwt.MapClaims) { delete(c, "iss") }), s.secret), ReasonMissingClaim},
		{"audience mismatch", full,
			sign(t, jwt.SigningMethodHS256, "", with(func(c jwt.MapClaims) { c["aud"] = []string{"other"} }), s.secret), ReasonBadAudience},
		{"audience in a list", full,
			sign(t, jwt.SigningMethodHS256, "", with(func(c jwt.MapClaims) { c["aud"] = []string{"other", testAudience} }), s.secret), ""},
		{"iss and aud optional when not configured",
			s.authenticator(t, func(c *Config) { c.JWT.Issuer, c.JWT.Audience = "", "" }),
			sign(t, jwt.SigningMethodHS256, "", with(func(c jwt.MapClaims) { delete(c, "iss"); delete(c, "aud") }), s.secret), ""},
		{"missing tenant claim", full,
			sign(t, jwt.SigningMethodHS256, "", with(func(c jwt.MapClaims) { delete(c, "tenant") }), s.secret), ReasonMissingTenant},
		{"tenant claim not a string", full,
			sign(t, jwt.SigningMethodHS256, "", with(func(c jwt.MapClaims) { c["tenant"] = []string{"acme"} }), s.secret), ReasonMissingTenant},
		{"unknown tenant", full,
			sign(t, jwt.SigningMethodHS256, "", with(func(c jwt.MapClaims) { c["tenant"] = "initech" }), s.secret), ReasonUnknownTenant},
		{"missing sub", full,
			sign(t, jwt.SigningMethodHS256, "", with(func(c jwt.MapClaims) { delete(c, "sub") }), s.secret), ReasonMissingSubject},
		{"empty sub", full,
			sign(t, jwt.SigningMethodHS256, "", with(func(c jwt.MapClaims) { c["sub"] = "" }), s.secret), ReasonMissingSubject},
		{"sub too long", full,
			sign(t, jwt.SigningMethodHS256, "", with(func(c jwt.MapClaims) { c["sub"] = strings.Repeat("a", 257) }), s.secret), ReasonBadClaims},
		{"roles of the wrong type", full,
			sign(t, jwt.SigningMethodHS256, "", with(func(c jwt.MapClaims) { c["roles"] = 7 }), s.secret), ReasonBadClaims},
		{"roles array with a non-string", full,
			sign(t, jwt.SigningMethodHS256, "", with(func(c jwt.MapClaims) { c["roles"] = []any{"agent", 1} }), s.secret), ReasonBadClaims},
		{"malformed token", full, "abc.def.ghi", ReasonMalformedToken},
		{"unknown alg", full,
			b64u([]byte(`{"alg":"XY256","typ":"JWT"}`)) + "." + b64u([]byte(`{"sub":"a"}`)) + ".c2ln", ReasonAlgorithm},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := tt.a.AuthenticateHeader("Bearer " + tt.token)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if id.Tenant != "acme" || id.Principal != "alice" || id.Method != "jwt" {
					t.Errorf("identity = %+v", id)
				}
				return
			}
			wantReason(t, err, tt.want)
			if id != nil {
				t.Errorf("identity returned with an error: %+v", id)
			}
		})
	}
}

func TestTamperedPayloadIsRefused(t *testing.T) {
	s := newSetup(t)
	a := s.authenticator(t, nil)
	tok := sign(t, jwt.SigningMethodHS256, "", baseClaims(), s.secret)
	parts := strings.Split(tok, ".")
	parts[1] = b64u(must(json.Marshal(with(func(c jwt.MapClaims) { c["tenant"] = "globex" }))))
	_, err := a.AuthenticateHeader("Bearer " + strings.Join(parts, "."))
	wantReason(t, err, ReasonBadSignature)
}

func TestJWTIdentity(t *testing.T) {
	s := newSetup(t)
	a := s.authenticator(t, nil)
	tests := []struct {
		name   string
		claims jwt.MapClaims
		roles  []string
		groups []string
		client string
	}{
		{"roles as an array", baseClaims(), []string{"agent"}, nil, "platform-x"},
		{"roles as a space-separated string",
			with(func(c jwt.MapClaims) { c["roles"] = "agent  auditor" }), []string{"agent", "auditor"}, nil, "platform-x"},
		{"roles missing", with(func(c jwt.MapClaims) { delete(c, "roles") }), nil, nil, "platform-x"},
		{"groups as an array", with(func(c jwt.MapClaims) { c["groups"] = []string{"eng", "oncall"} }), []string{"agent"}, []string{"eng", "oncall"}, "platform-x"},
		{"client from client_id when azp is absent",
			with(func(c jwt.MapClaims) { delete(c, "azp"); c["client_id"] = "cli" }), []string{"agent"}, nil, "cli"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := a.AuthenticateHeader("Bearer " + sign(t, jwt.SigningMethodHS256, "", tt.claims, s.secret))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(id.Roles, tt.roles) || !slices.Equal(id.Groups, tt.groups) || id.Client != tt.client {
				t.Errorf("roles %q groups %q client %q; want %q %q %q", id.Roles, id.Groups, id.Client, tt.roles, tt.groups, tt.client)
			}
		})
	}

	id, err := a.AuthenticateHeader("Bearer " + sign(t, jwt.SigningMethodHS256, "", with(func(c jwt.MapClaims) { c["jti"] = "j1" }), s.secret))
	if err != nil {
		t.Fatal(err)
	}
	for _, reg := range []string{"iss", "sub", "aud", "exp", "nbf", "iat", "jti"} {
		if _, ok := id.Claims[reg]; ok {
			t.Errorf("registered claim %q passed to policy", reg)
		}
	}
	if id.Claims["team"] != "blue" || id.Claims["tenant"] != "acme" {
		t.Errorf("claims = %v", id.Claims)
	}
}

func TestAPIKeys(t *testing.T) {
	s := newSetup(t)
	a := s.authenticator(t, nil)

	id, err := a.AuthenticateHeader("Bearer " + testAPIKey)
	if err != nil {
		t.Fatal(err)
	}
	want := identity.Identity{Tenant: "acme", Principal: "ci-bot", Roles: []string{"agent"}, Groups: []string{"bots"}, Client: "ci-bot", Method: "api_key"}
	if id.Tenant != want.Tenant || id.Principal != want.Principal || !slices.Equal(id.Roles, want.Roles) ||
		!slices.Equal(id.Groups, want.Groups) || id.Client != want.Client || id.Method != want.Method {
		t.Errorf("identity = %+v, want %+v", id, want)
	}
	id.Roles[0] = "admin" // must not leak into the next caller's identity
	if again, _ := a.AuthenticateHeader("Bearer " + testAPIKey); again.Roles[0] != "agent" {
		t.Errorf("identities share the configured roles slice")
	}

	_, err = a.AuthenticateHeader("Bearer " + testAPIKey + "x")
	wantReason(t, err, ReasonUnknownAPIKey)
	if strings.Contains(err.Error(), testAPIKey) {
		t.Errorf("error message carries the token: %v", err)
	}

	orphan := s.authenticator(t, func(c *Config) { c.Tenants = []string{"globex"} })
	_, err = orphan.AuthenticateHeader("Bearer " + testAPIKey)
	wantReason(t, err, ReasonUnknownTenant)
}

func TestMalformedHeaders(t *testing.T) {
	s := newSetup(t)
	a := s.authenticator(t, nil)
	tests := []struct {
		header string
		want   Reason
	}{
		{"", ReasonMissingCredentials},
		{"Basic x", ReasonMalformedHeader},
		{"Bearer", ReasonMalformedHeader},
		{"Bearer ", ReasonMalformedHeader},
		{"Bearer  two-spaces", ReasonMalformedHeader},
		{"Bearer a b", ReasonMalformedHeader},
		{"Bearer a\tb", ReasonMalformedHeader},
		{"Bearer =abc", ReasonMalformedHeader},
		{"Bearer ab=c", ReasonMalformedHeader},
		{"Bearer " + strings.Repeat("a", maxTokenBytes+1), ReasonMalformedHeader},
		{"Token " + testAPIKey, ReasonMalformedHeader},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			_, err := a.AuthenticateHeader(tt.header)
			wantReason(t, err, tt.want)
		})
	}

	for _, scheme := range []string{"bearer", "BEARER", "bEaReR"} {
		if _, err := a.AuthenticateHeader(scheme + " " + testAPIKey); err != nil {
			t.Errorf("scheme %q refused: %v", scheme, err)
		}
	}
}

func TestAuthenticateRequest(t *testing.T) {
	s := newSetup(t)
	a := s.authenticator(t, nil)

	r := httptest.NewRequest("GET", "/v1/tools", nil)
	_, err := a.Authenticate(r)
	wantReason(t, err, ReasonMissingCredentials)

	r.Header.Set("Authorization", "Bearer "+testAPIKey)
	if _, err := a.Authenticate(r); err != nil {
		t.Errorf("refused: %v", err)
	}

	r.Header.Add("Authorization", "Bearer "+testAPIKey)
	_, err = a.Authenticate(r)
	wantReason(t, err, ReasonMalformedHeader)
}

func TestNewAuthenticatorFailsOnUnusableKeys(t *testing.T) {
	s := newSetup(t)
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	if err := os.WriteFile(short, []byte("too-short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	badJWKS := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(badJWKS, []byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"missing secret file", func(c *Config) { c.JWT.HS256SecretFile = filepath.Join(dir, "absent") }},
		{"short secret", func(c *Config) { c.JWT.HS256SecretFile = short }},
		{"bad jwks", func(c *Config) { c.JWT.JWKSFile = badJWKS }},
		{"nothing configured", func(c *Config) { *c = Config{Tenants: c.Tenants} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := *s.cfg
			tt.edit(&cfg)
			if _, err := NewAuthenticator(cfg); err == nil {
				t.Error("NewAuthenticator succeeded")
			}
		})
	}
}

func TestSingleKeyJWKSAcceptsTokenWithoutKid(t *testing.T) {
	s := newSetup(t)
	k := testKeys()
	point := must(k.ec.PublicKey.Bytes())
	file := filepath.Join(t.TempDir(), "one.json")
	doc := fmtJSON(map[string]any{"keys": []map[string]any{{"kty": "EC", "crv": "P-256", "x": b64u(point[1:33]), "y": b64u(point[33:])}}})
	if err := os.WriteFile(file, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	a := s.authenticator(t, func(c *Config) { c.JWT.JWKSFile = file })
	if _, err := a.AuthenticateHeader("Bearer " + sign(t, jwt.SigningMethodES256, "", baseClaims(), k.ec)); err != nil {
		t.Errorf("refused: %v", err)
	}
}

func fmtJSON(v any) []byte { return must(json.Marshal(v)) }

func TestEnsureHS256Secret(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "var", "secrets")
	path := filepath.Join(dir, "dev-jwt-secret")

	created, err := EnsureHS256Secret(path)
	if err != nil || !created {
		t.Fatalf("first call: created=%v err=%v", created, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != 64 {
		t.Errorf("secret is %d chars, want 64", len(data))
	}
	if _, err := hex.DecodeString(string(data)); err != nil {
		t.Errorf("secret is not hex: %v", err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, want 0600", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v, want 0700", fi.Mode().Perm())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}

	created, err = EnsureHS256Secret(path)
	if err != nil || created {
		t.Fatalf("second call: created=%v err=%v", created, err)
	}
	if again, _ := os.ReadFile(path); string(again) != string(data) {
		t.Error("existing secret was replaced")
	}

	withNewline := filepath.Join(t.TempDir(), "nl")
	if err := os.WriteFile(withNewline, []byte(strings.Repeat("s", 32)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if secret, err := ReadHS256Secret(withNewline); err != nil || len(secret) != 32 {
		t.Errorf("secret with trailing newline: len %d err %v", len(secret), err)
	}

	short := filepath.Join(t.TempDir(), "short")
	if err := os.WriteFile(short, []byte(strings.Repeat("s", 31)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureHS256Secret(short); err == nil {
		t.Error("short existing secret accepted")
	}
}

func TestMintHS256RoundTrip(t *testing.T) {
	s := newSetup(t)
	a := s.authenticator(t, func(c *Config) {
		c.JWT.TenantClaim = "org"
		c.JWT.RolesClaim = "perms"
	})
	tok, err := MintHS256(s.secret, MintClaims{
		Tenant: "globex", Subject: "bob", Roles: []string{"auditor", "agent"}, TTL: time.Hour,
		Issuer: testIssuer, Audience: testAudience, TenantClaim: "org", RolesClaim: "perms",
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	id, err := a.AuthenticateHeader("Bearer " + tok)
	if err != nil {
		t.Fatal(err)
	}
	if id.Tenant != "globex" || id.Principal != "bob" || !slices.Equal(id.Roles, []string{"auditor", "agent"}) {
		t.Errorf("identity = %+v", id)
	}

	// Past its TTL a minted token is refused.
	later, err := NewAuthenticator(*s.cfg, WithClock(func() time.Time { return now.Add(2 * time.Hour) }))
	if err != nil {
		t.Fatal(err)
	}
	tok2, err := MintHS256(s.secret, MintClaims{Tenant: "acme", Subject: "bob", TTL: time.Hour, Issuer: testIssuer, Audience: testAudience}, now)
	if err != nil {
		t.Fatal(err)
	}
	_, err = later.AuthenticateHeader("Bearer " + tok2)
	wantReason(t, err, ReasonExpired)

	bad := []struct {
		name   string
		secret []byte
		c      MintClaims
	}{
		{"short secret", []byte("short"), MintClaims{Tenant: "acme", Subject: "bob", TTL: time.Hour}},
		{"no tenant", s.secret, MintClaims{Subject: "bob", TTL: time.Hour}},
		{"no subject", s.secret, MintClaims{Tenant: "acme", TTL: time.Hour}},
		{"zero ttl", s.secret, MintClaims{Tenant: "acme", Subject: "bob"}},
		{"registered claim name", s.secret, MintClaims{Tenant: "acme", Subject: "bob", TTL: time.Hour, TenantClaim: "sub"}},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := MintHS256(tt.secret, tt.c, now); err == nil {
				t.Error("MintHS256 succeeded")
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// BenchmarkAuthenticateHS256 measures a token seen before (the verified-token
// cache answers) and a token verified from scratch every time.
func BenchmarkAuthenticateHS256(b *testing.B) {
	s := newSetup(b)
	header := "Bearer " + sign(b, jwt.SigningMethodHS256, "", baseClaims(), s.secret)
	for _, bc := range []struct {
		name  string
		cache int
	}{{"cached", defaultTokenCacheSize}, {"uncached", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			a, err := NewAuthenticator(*s.cfg, WithClock(func() time.Time { return now }), WithTokenCache(bc.cache))
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.AuthenticateHeader(header); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAuthenticateAPIKey(b *testing.B) {
	s := newSetup(b)
	a := s.authenticator(b, nil)
	header := "Bearer " + testAPIKey
	b.ReportAllocs()
	for b.Loop() {
		if _, err := a.AuthenticateHeader(header); err != nil {
			b.Fatal(err)
		}
	}
}
