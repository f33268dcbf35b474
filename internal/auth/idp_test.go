package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/jwks/jwkstest"
)

// idpClaims are claims the local IdP's tokens carry, valid at the real
// time (the key set refreshes on the real clock).
func idpClaims(idp *jwkstest.IdP) jwt.MapClaims {
	t := time.Now()
	return jwt.MapClaims{
		"iss": idp.Issuer(), "aud": testAudience, "sub": "alice", "tenant": "acme", "roles": []string{"developer"},
		"iat": t.Unix(), "nbf": t.Add(-time.Minute).Unix(), "exp": t.Add(time.Hour).Unix(),
	}
}

func idpWith(idp *jwkstest.IdP, edit func(jwt.MapClaims)) jwt.MapClaims {
	c := idpClaims(idp)
	edit(c)
	return c
}

// oidcAuthenticator verifies tokens of idp (discovered from its issuer)
// besides the HS256 secret of s. No clock is injected: key refreshes run
// on the real one.
func oidcAuthenticator(t *testing.T, s setup, idp *jwkstest.IdP, edit func(*JWT)) *Authenticator {
	t.Helper()
	cfg := *s.cfg
	cfg.JWT.JWKSFile = ""
	cfg.JWT.Issuer = ""
	cfg.JWT.OIDCIssuer = idp.Issuer()
	cfg.JWT.JWKSRefresh = time.Hour
	cfg.JWT.JWKSUnknownKIDRefresh = time.Hour
	if edit != nil {
		edit(&cfg.JWT)
	}
	a, err := NewAuthenticator(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

func authOK(t *testing.T, a *Authenticator, token string) *identity.Identity {
	t.Helper()
	id, err := a.AuthenticateHeader("Bearer " + token)
	if err != nil {
		t.Fatalf("refused: %v", err)
	}
	return id
}

func TestOIDCIssuerTokens(t *testing.T) {
	s := newSetup(t)
	k1 := jwkstest.NewKey("k1", "RS256")
	idp := jwkstest.New(t, k1)
	a := oidcAuthenticator(t, s, idp, nil)

	id := authOK(t, a, k1.Sign(idpClaims(idp)))
	if id.Tenant != "acme" || id.Principal != "alice" || !id.HasRole("developer") || id.Method != "jwt" {
		t.Fatalf("identity = %+v", id)
	}
	if st := a.KeyStatus(); st != "ok" {
		t.Errorf("KeyStatus = %q", st)
	}
	for _, tt := range []struct {
		name  string
		token string
		want  Reason
	}{
		{"another issuer", k1.Sign(idpWith(idp, func(c jwt.MapClaims) { c["iss"] = "https://evil.example" })), ReasonBadIssuer},
		{"no issuer", k1.Sign(idpWith(idp, func(c jwt.MapClaims) { delete(c, "iss") })), ReasonMissingClaim},
		{"another audience", k1.Sign(idpWith(idp, func(c jwt.MapClaims) { c["aud"] = "other" })), ReasonBadAudience},
		{"expired", k1.Sign(idpWith(idp, func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() })), ReasonExpired},
		{"signed by a key the provider never published", jwkstest.NewKey("k1", "RS256").Sign(idpClaims(idp)), ReasonBadSignature},
		{"unknown kid", jwkstest.NewKey("k9", "ES256").Sign(idpClaims(idp)), ReasonUnknownKey},
		{"HS256 keyed with the provider's kid", sign(t, jwt.SigningMethodHS256, "k1", idpClaims(idp), []byte("0123456789abcdef0123456789abcdef")), ReasonBadSignature},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := a.AuthenticateHeader("Bearer " + tt.token)
			wantReason(t, err, tt.want)
		})
	}
	// The dev secret still verifies HS256 tokens beside the provider's;
	// the provider's issuer binds only the provider's keys.
	authOK(t, a, sign(t, jwt.SigningMethodHS256, "", idpWith(idp, func(c jwt.MapClaims) { delete(c, "iss") }), s.secret))

	if st := s.authenticator(t, nil).KeyStatus(); st != "" {
		t.Errorf("KeyStatus without an identity provider = %q, want empty", st)
	}
}

func TestJWKSURLTokens(t *testing.T) {
	s := newSetup(t)
	k1 := jwkstest.NewKey("k1", "EdDSA")
	idp := jwkstest.New(t, k1)
	a := oidcAuthenticator(t, s, idp, func(j *JWT) {
		j.OIDCIssuer, j.JWKSURL, j.Issuer = "", idp.JWKSURL(), "https://issuer.test"
	})
	authOK(t, a, k1.Sign(idpWith(idp, func(c jwt.MapClaims) { c["iss"] = "https://issuer.test" })))
	if idp.DiscoveryFetches() != 0 {
		t.Error("jwks_url fetched a discovery document")
	}
}

func TestRotatedKeyIsAcceptedWithoutRestart(t *testing.T) {
	s := newSetup(t)
	k1, k2 := jwkstest.NewKey("k1", "ES256"), jwkstest.NewKey("k2", "ES256")
	idp := jwkstest.New(t, k1)
	a := oidcAuthenticator(t, s, idp, nil)
	authOK(t, a, k1.Sign(idpClaims(idp)))

	idp.Publish(k1, k2)
	authOK(t, a, k2.Sign(idpClaims(idp)))
	if n := idp.JWKSFetches(); n != 2 {
		t.Fatalf("key set fetched %d times, want 2", n)
	}
	// The old key keeps working while it is published.
	authOK(t, a, k1.Sign(idpWith(idp, func(c jwt.MapClaims) { c["sub"] = "bob" })))
}

// Tokens with garbage kids, well formed and signed, sent concurrently:
// every one is refused and the provider sees at most one extra fetch.
func TestGarbageKIDsCannotHammerTheProvider(t *testing.T) {
	s := newSetup(t)
	k1 := jwkstest.NewKey("k1", "ES256")
	idp := jwkstest.New(t, k1)
	a := oidcAuthenticator(t, s, idp, nil)
	authOK(t, a, k1.Sign(idpClaims(idp)))
	before := idp.JWKSFetches()

	forger := jwkstest.NewKey("", "ES256")
	var wg sync.WaitGroup
	var mu sync.Mutex
	reasons := map[Reason]int{}
	for g := range 32 {
		wg.Go(func() {
			for i := range 20 {
				tok := jwt.NewWithClaims(jwt.SigningMethodES256, idpClaims(idp))
				tok.Header["kid"] = fmt.Sprintf("forged-%d-%d", g, i)
				str, err := tok.SignedString(forger.Private())
				if err != nil {
					panic(err)
				}
				r, _ := http.NewRequest("GET", "/v1/tools", nil)
				r.Header.Set("Authorization", "Bearer "+str)
				_, err = a.Authenticate(r)
				var ae *Error
				mu.Lock()
				if errors.As(err, &ae) {
					reasons[ae.Reason]++
				} else {
					reasons["accepted or not an *Error"]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(reasons) != 1 || reasons[ReasonUnknownKey] != 640 {
		t.Fatalf("refusals = %v, want 640 × %q", reasons, ReasonUnknownKey)
	}
	if n := idp.JWKSFetches() - before; n > 1 {
		t.Fatalf("640 garbage kids made %d key set fetches, want at most 1", n)
	}
}

func TestDiscoveryWithAnotherIssuerRefusesItsTokens(t *testing.T) {
	s := newSetup(t)
	k1 := jwkstest.NewKey("k1", "ES256")
	idp := jwkstest.New(t, k1)
	idp.SetDiscoveryIssuer("https://evil.example")
	a := oidcAuthenticator(t, s, idp, func(j *JWT) { j.JWKSUnknownKIDRefresh = time.Second })

	_, err := a.AuthenticateHeader("Bearer " + k1.Sign(idpClaims(idp)))
	wantReason(t, err, ReasonKeysNotLoaded)
	if st := a.KeyStatus(); st != "keys not loaded" {
		t.Errorf("KeyStatus = %q", st)
	}
	if idp.JWKSFetches() != 0 {
		t.Error("fetched the keys of a discovery document naming another issuer")
	}
	// Other credentials keep working: the gateway is not locked out.
	authOK(t, a, sign(t, jwt.SigningMethodHS256, "", idpClaims(idp), s.secret))
}

// A verified token is cached, but never past the removal of its key from
// the provider's set: after the refresh that drops the key, the cached
// token is refused like a new one.
func TestCachedTokenDoesNotOutliveItsKey(t *testing.T) {
	s := newSetup(t)
	k1, k2 := jwkstest.NewKey("k1", "ES256"), jwkstest.NewKey("k2", "ES256")
	idp := jwkstest.New(t, k1, k2)
	a := oidcAuthenticator(t, s, idp, func(j *JWT) { j.JWKSRefresh = 50 * time.Millisecond })
	tok := k1.Sign(idpClaims(idp))
	authOK(t, a, tok)
	authOK(t, a, tok)
	if _, ok := a.cache.get(tok, time.Now()); !ok {
		t.Fatal("the verified token was not cached")
	}
	idp.Publish(k2) // k1 is retired
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := a.AuthenticateHeader("Bearer " + tok)
		if err != nil {
			wantReason(t, err, ReasonUnknownKey)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a token of a retired key is still accepted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := a.cache.get(tok, time.Now()); ok {
		t.Error("the token of a retired key is still cached")
	}
	authOK(t, a, k2.Sign(idpClaims(idp)))
}

func TestProviderDownAtStart(t *testing.T) {
	s := newSetup(t)
	k1 := jwkstest.NewKey("k1", "ES256")
	idp := jwkstest.New(t, k1)
	idp.SetStatus(http.StatusBadGateway)
	a := oidcAuthenticator(t, s, idp, func(j *JWT) { j.JWKSUnknownKIDRefresh = time.Second })
	tok := k1.Sign(idpClaims(idp))
	_, err := a.AuthenticateHeader("Bearer " + tok)
	wantReason(t, err, ReasonKeysNotLoaded)
	if _, ok := a.cache.get(tok, time.Now()); ok {
		t.Fatal("a refused token was cached")
	}
	idp.SetStatus(0)
	deadline := time.Now().Add(10 * time.Second)
	for a.KeyStatus() != "ok" {
		if time.Now().After(deadline) {
			t.Fatal("the keys did not load once the provider was back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	authOK(t, a, tok)
}

// hs256 signs header and payload, given as JSON text, byte for byte.
func hs256(secret []byte, header, payload string) string {
	in := b64u([]byte(header)) + "." + b64u([]byte(payload))
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(in))
	return in + "." + b64u(m.Sum(nil))
}

// Correctly signed tokens that a lenient decoder would accept: a crit
// header, duplicate members. The control case shows the signature and
// claims are otherwise good.
func TestCritAndDuplicateMembersAreRefused(t *testing.T) {
	s := newSetup(t)
	a := s.authenticator(t, func(c *Config) { c.JWT.Issuer = "" })
	claims := func(tenant string) string {
		return fmt.Sprintf(`"aud":%q,"sub":"alice",%s"exp":%d`, testAudience, tenant, now.Add(time.Hour).Unix())
	}
	const hdr = `{"alg":"HS256","typ":"JWT"}`
	tests := []struct {
		name            string
		header, payload string
		want            Reason // "": accepted
	}{
		{"control", hdr, `{` + claims(`"tenant":"acme",`) + `}`, ""},
		{"crit naming an unknown parameter", `{"alg":"HS256","typ":"JWT","crit":["x-tenant-binding"],"x-tenant-binding":true}`,
			`{` + claims(`"tenant":"acme",`) + `}`, ReasonCriticalHeader},
		{"crit naming exp", `{"alg":"HS256","crit":["exp"],"exp":1}`, `{` + claims(`"tenant":"acme",`) + `}`, ReasonCriticalHeader},
		{"duplicate tenant (last wins in encoding/json)", hdr, `{` + claims(`"tenant":"globex","tenant":"acme",`) + `}`, ReasonMalformedToken},
		{"duplicate sub", hdr, `{"sub":"mallory",` + claims(`"tenant":"acme",`) + `}`, ReasonMalformedToken},
		{"duplicate nested member", hdr, `{"team":{"a":1,"a":2},` + claims(`"tenant":"acme",`) + `}`, ReasonMalformedToken},
		{"duplicate alg in the header", `{"alg":"none","alg":"HS256"}`, `{` + claims(`"tenant":"acme",`) + `}`, ReasonMalformedToken},
		{"duplicate member spelled with an escape", hdr, `{"tenant":"globex","t\u0065nant":"acme",` + claims("") + `}`, ReasonMalformedToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := a.AuthenticateHeader("Bearer " + hs256(s.secret, tt.header, tt.payload))
			if tt.want == "" {
				if err != nil || id.Tenant != "acme" {
					t.Fatalf("control refused: %v", err)
				}
				return
			}
			wantReason(t, err, tt.want)
		})
	}
}

// A token refused for its structure never makes the gateway fetch keys.
func TestMalformedTokensFetchNothing(t *testing.T) {
	s := newSetup(t)
	k1 := jwkstest.NewKey("k1", "ES256")
	idp := jwkstest.New(t, k1)
	a := oidcAuthenticator(t, s, idp, nil)
	authOK(t, a, k1.Sign(idpClaims(idp)))
	before := idp.JWKSFetches()
	for i := range 50 {
		h := fmt.Sprintf(`{"alg":"ES256","kid":"garbage-%d","crit":["b64"],"b64":false}`, i)
		if i%2 == 1 {
			h = fmt.Sprintf(`{"alg":"ES256","kid":"garbage-%d","kid":"k1"}`, i)
		}
		_, err := a.AuthenticateHeader("Bearer " + b64u([]byte(h)) + "." + b64u([]byte(`{"sub":"a"}`)) + ".c2ln")
		if err == nil {
			t.Fatal("accepted")
		}
	}
	if n := idp.JWKSFetches() - before; n != 0 {
		t.Fatalf("malformed tokens made %d key set fetches", n)
	}
}

// The cost of a token from an identity provider, cached (a map lookup and
// the check that the set still holds its key) and not (the structural
// checks and an ES256 verification).
func BenchmarkAuthenticateIdP(b *testing.B) {
	s := newSetup(b)
	k1 := jwkstest.NewKey("k1", "ES256")
	idp := jwkstest.New(b, k1, jwkstest.NewKey("k2", "ES256"), jwkstest.NewKey("k3", "RS256"))
	header := "Bearer " + k1.Sign(idpClaims(idp))
	for _, bc := range []struct {
		name  string
		cache int
	}{{"cached", defaultTokenCacheSize}, {"uncached", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			cfg := *s.cfg
			cfg.JWT.JWKSFile, cfg.JWT.Issuer, cfg.JWT.OIDCIssuer = "", "", idp.Issuer()
			a, err := NewAuthenticator(cfg, WithTokenCache(bc.cache))
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.AuthenticateHeader(header); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Header parameters that name where to get a key (jku, x5u) or carry one
// (jwk) are never followed: only the configured provider's set counts.
// Without an HS256 secret, neither HS256 nor "none" gets through.
func TestTokensCannotBringTheirOwnKeys(t *testing.T) {
	s := newSetup(t)
	k1 := jwkstest.NewKey("k1", "ES256")
	idp := jwkstest.New(t, k1)
	attacker := jwkstest.NewKey("evil", "ES256")
	evil := jwkstest.New(t, attacker)
	a := oidcAuthenticator(t, s, idp, func(j *JWT) { j.HS256SecretFile = "" })
	authOK(t, a, k1.Sign(idpClaims(idp)))

	for _, tt := range []struct {
		name   string
		header map[string]any
		want   Reason
	}{
		{"jku", map[string]any{"kid": "evil", "jku": evil.JWKSURL()}, ReasonUnknownKey},
		{"x5u", map[string]any{"kid": "evil", "x5u": evil.JWKSURL()}, ReasonUnknownKey},
		{"embedded jwk", map[string]any{"kid": "evil", "jwk": attacker.JWK()}, ReasonUnknownKey},
		{"embedded jwk under the provider's kid", map[string]any{"kid": "k1", "jwk": attacker.JWK()}, ReasonBadSignature},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tok := jwt.NewWithClaims(jwt.SigningMethodES256, idpClaims(idp))
			for k, v := range tt.header {
				tok.Header[k] = v
			}
			str, err := tok.SignedString(attacker.Private())
			if err != nil {
				t.Fatal(err)
			}
			_, err = a.AuthenticateHeader("Bearer " + str)
			wantReason(t, err, tt.want)
		})
	}
	if evil.JWKSFetches() != 0 {
		t.Fatal("followed a URL from a token's header")
	}
	_, err := a.AuthenticateHeader("Bearer " + sign(t, jwt.SigningMethodHS256, "k1", idpClaims(idp), []byte("0123456789abcdef0123456789abcdef")))
	wantReason(t, err, ReasonAlgorithm)
	_, err = a.AuthenticateHeader("Bearer " + sign(t, jwt.SigningMethodNone, "k1", idpClaims(idp), jwt.UnsafeAllowNoneSignatureType))
	wantReason(t, err, ReasonAlgorithm)
}
