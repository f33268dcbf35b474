package gateway

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/internal/jwks/jwkstest"
)

// startWithIdP runs a gateway that takes tokens from idp (auth.jwt.oidc_issuer),
// besides the harness's HS256 secret.
func startWithIdP(t *testing.T, idp *jwkstest.IdP, extra string) *harness {
	t.Helper()
	return start(t, func(s *setup) {
		s.authYAML = fmt.Sprintf("    oidc_issuer: %s\n%s", idp.Issuer(), extra)
	})
}

func idpToken(idp *jwkstest.IdP, k *jwkstest.Key, sub string, roles ...string) string {
	now := time.Now()
	return k.Sign(jwt.MapClaims{
		"iss": idp.Issuer(), "sub": sub, "tenant": "acme", "roles": roles,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	})
}

func (h *harness) identityCheck() (int, string) {
	h.t.Helper()
	r := h.do("GET", "/readyz", "", nil)
	s, _ := r.body["checks"].(map[string]any)["identity"].(string)
	return r.status, s
}

func TestIdentityProviderEndToEnd(t *testing.T) {
	t.Parallel()
	k1, k2 := jwkstest.NewKey("k1", "RS256"), jwkstest.NewKey("k2", "ES256")
	idp := jwkstest.New(t, k1)
	h := startWithIdP(t, idp, "    jwks_unknown_kid_refresh: 1h\n")

	// A token from the provider calls a tool; the principal comes from it.
	r := h.call(idpToken(idp, k1, "alice", "developer"), "read-file", `{"arguments":{"path":"docs/guide.md"}}`)
	if r.status != 200 || r.str("outcome") != "ok" {
		t.Fatalf("provider token: %d %s", r.status, r.raw)
	}
	ev := h.events("acme", "call_id="+r.str("call_id")+"&phase=decision")
	if len(ev) != 1 || ev[0]["principal"] != "alice" {
		t.Fatalf("decision event %v", ev)
	}
	if code, st := h.identityCheck(); code != 200 || st != "ok" {
		t.Fatalf("readyz: %d identity=%q", code, st)
	}

	// The provider rotates to k2: its tokens work at once, no restart.
	idp.Publish(k1, k2)
	if r := h.call(idpToken(idp, k2, "bob", "developer"), "read-file", `{"arguments":{"path":"docs/guide.md"}}`); r.status != 200 || r.str("outcome") != "ok" {
		t.Fatalf("rotated key: %d %s", r.status, r.raw)
	}
	fetches := idp.JWKSFetches()

	// A flood of forged kids: all refused, the provider barely notices.
	forger := jwkstest.NewKey("", "ES256")
	for i := range 100 {
		forger.KID = fmt.Sprintf("forged-%d", i)
		r := h.do("GET", "/v1/tools", idpToken(idp, forger, "mallory", "admin"), nil)
		if r.status != 401 || r.errCode() != "unauthenticated" {
			t.Fatalf("forged kid %d: %d %s", i, r.status, r.raw)
		}
	}
	if n := idp.JWKSFetches() - fetches; n > 1 {
		t.Fatalf("100 forged kids made %d key set fetches, want at most 1", n)
	}

	// Tokens signed by the provider's own key but with a crit header or a
	// duplicated member are refused before their key is even looked up.
	seg := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	exp := time.Now().Add(time.Hour).Unix()
	for name, tc := range map[string]struct{ header, payload, reason string }{
		"crit": {`{"alg":"ES256","kid":"k2","crit":["x-bind"],"x-bind":1}`,
			fmt.Sprintf(`{"iss":%q,"sub":"alice","tenant":"acme","exp":%d}`, idp.Issuer(), exp), "unsupported critical header"},
		"duplicate tenant": {`{"alg":"ES256","kid":"k2"}`,
			fmt.Sprintf(`{"iss":%q,"sub":"alice","tenant":"globex","tenant":"acme","exp":%d}`, idp.Issuer(), exp), "malformed token"},
	} {
		input := seg(tc.header) + "." + seg(tc.payload)
		sig, err := jwt.SigningMethodES256.Sign(input, k2.Private())
		if err != nil {
			t.Fatal(err)
		}
		tok := input + "." + base64.RawURLEncoding.EncodeToString(sig)
		if r := h.call(tok, "read-file", `{"arguments":{"path":"docs/guide.md"}}`); r.status != 401 {
			t.Fatalf("%s: %d %s", name, r.status, r.raw)
		}
		m := string(h.do("GET", "/metrics", "", nil).raw)
		if !strings.Contains(m, `toolgate_unauthenticated_total{reason="`+tc.reason+`"} 1`) {
			t.Errorf("%s: no refusal counted with reason %q", name, tc.reason)
		}
	}

	// The issuer of the discovery document is required.
	wrongIss := k2.Sign(jwt.MapClaims{"iss": "https://evil.example", "sub": "alice", "tenant": "acme", "exp": exp})
	if r := h.do("GET", "/v1/tools", wrongIss, nil); r.status != 401 {
		t.Fatalf("token of another issuer: %d %s", r.status, r.raw)
	}
}

// A discovery document that names another issuer: the gateway starts,
// says it is not ready, refuses every token that would need those keys
// and never fetches them; the dev secret still works.
func TestIdentityProviderNamingAnotherIssuerIsNotTrusted(t *testing.T) {
	t.Parallel()
	k1 := jwkstest.NewKey("k1", "ES256")
	idp := jwkstest.New(t, k1)
	idp.SetDiscoveryIssuer("https://evil.example")
	h := startWithIdP(t, idp, "    jwks_unknown_kid_refresh: 1s\n")

	if r := h.call(idpToken(idp, k1, "alice", "developer"), "read-file", `{"arguments":{"path":"docs/guide.md"}}`); r.status != 401 {
		t.Fatalf("token of an untrusted provider: %d %s", r.status, r.raw)
	}
	if code, st := h.identityCheck(); code != 503 || st != "keys not loaded" {
		t.Fatalf("readyz: %d identity=%q", code, st)
	}
	if idp.JWKSFetches() != 0 {
		t.Fatal("fetched the key set of a discovery document naming another issuer")
	}
	if r := h.call(h.token("acme", "alice", "developer"), "read-file", `{"arguments":{"path":"docs/guide.md"}}`); r.status != 200 {
		t.Fatalf("dev token: %d %s", r.status, r.raw)
	}
}

// A provider that is down when the gateway starts: not ready and tokens
// refused, then ready and accepted once it answers, without a restart.
func TestIdentityProviderDownAtStart(t *testing.T) {
	t.Parallel()
	k1 := jwkstest.NewKey("k1", "ES256")
	idp := jwkstest.New(t, k1)
	idp.SetStatus(http.StatusServiceUnavailable)
	h := startWithIdP(t, idp, "    jwks_unknown_kid_refresh: 1s\n")
	tok := idpToken(idp, k1, "alice", "developer")
	if r := h.do("GET", "/v1/tools", tok, nil); r.status != 401 {
		t.Fatalf("token while the provider is down: %d %s", r.status, r.raw)
	}
	if m := string(h.do("GET", "/metrics", "", nil).raw); !strings.Contains(m, `toolgate_unauthenticated_total{reason="keys not loaded"} 1`) {
		t.Error("the refusal is not counted as keys not loaded")
	}
	if code, st := h.identityCheck(); code != 503 || st != "keys not loaded" {
		t.Fatalf("readyz: %d identity=%q", code, st)
	}
	idp.SetStatus(0)
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, st := h.identityCheck()
		if code == 200 && st == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready after the provider came back: %d %q", code, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := h.do("GET", "/v1/tools", tok, nil); r.status != 200 {
		t.Fatalf("token once the keys loaded: %d %s", r.status, r.raw)
	}
}
