package v1_test

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
)

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The wire form of the claims: member names, order, which are left out.
func TestClaimsJSONForm(t *testing.T) {
	at := time.Unix(1700000000, 0)
	c := upstreamv1.Claims{
		Issuer: "toolgate", Audience: "maintenance-window", Subject: "alice", Tenant: "acme", Roles: []string{"developer"},
		CallID: "c-1", SessionID: "s-1", RequestDigest: "sha256:doc", ArgsDigest: "sha256:args",
		IssuedAt: jwt.NewNumericDate(at), NotBefore: jwt.NewNumericDate(at), ExpiresAt: jwt.NewNumericDate(at.Add(time.Minute)), ID: "j-1",
	}
	const want = `{"iss":"toolgate","aud":"maintenance-window","sub":"alice","tenant":"acme","roles":["developer"],` +
		`"call_id":"c-1","session_id":"s-1","request_digest":"sha256:doc","args_digest":"sha256:args",` +
		`"iat":1700000000,"nbf":1700000000,"exp":1700000060,"jti":"j-1"}`
	if got := mustJSON(t, c); got != want {
		t.Fatalf("claims\n got %s\nwant %s", got, want)
	}
	c.SessionID = ""
	if got := mustJSON(t, c); strings.Contains(got, "session_id") {
		t.Fatalf("an empty session_id is sent: %s", got)
	}
	var back upstreamv1.Claims
	if err := json.Unmarshal([]byte(want), &back); err != nil || back.ExpiresAt.Unix() != 1700000060 || back.Audience != "maintenance-window" {
		t.Fatalf("decoded %+v, %v", back, err)
	}
	// aud is one string: an array is not the contract.
	if err := json.Unmarshal([]byte(`{"aud":["a","b"]}`), &back); err == nil {
		t.Fatal("an array aud decoded")
	}
}

// golang-jwt signs and validates Claims as they are.
func TestClaimsAreJWTClaims(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	now := time.Now()
	c := &upstreamv1.Claims{Issuer: upstreamv1.DefaultIssuer, Audience: "t", Subject: "alice", Roles: []string{},
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Minute))}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c).SignedString(priv)
	if err != nil {
		t.Fatal(err)
	}
	parse := func(aud string, at time.Time) error {
		var got upstreamv1.Claims
		_, err := jwt.ParseWithClaims(tok, &got, func(*jwt.Token) (any, error) { return pub, nil },
			jwt.WithValidMethods([]string{upstreamv1.Algorithm}), jwt.WithAudience(aud), jwt.WithIssuer(upstreamv1.DefaultIssuer),
			jwt.WithExpirationRequired(), jwt.WithTimeFunc(func() time.Time { return at }))
		if err == nil && got.Subject != "alice" {
			t.Fatalf("parsed %+v", got)
		}
		return err
	}
	if err := parse("t", now); err != nil {
		t.Fatal(err)
	}
	if err := parse("other", now); !errors.Is(err, jwt.ErrTokenInvalidAudience) {
		t.Fatalf("another audience: %v", err)
	}
	if err := parse("t", now.Add(2*time.Minute)); !errors.Is(err, jwt.ErrTokenExpired) {
		t.Fatalf("expired: %v", err)
	}
	var none upstreamv1.Claims
	if a, _ := none.GetAudience(); a != nil {
		t.Fatalf("empty aud = %q", a)
	}
}

func TestArgsDigest(t *testing.T) {
	if got := upstreamv1.ArgsDigest([]byte(`{}`)); got != "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a" {
		t.Fatalf("ArgsDigest({}) = %s", got)
	}
}

func TestJWKForm(t *testing.T) {
	pub := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	k := upstreamv1.NewJWK("k1", pub)
	const want = `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"O2onvM62pC1io6jQKm8Nc2UyFXcd4kOmOsBIoYtZ2ik","kid":"k1","alg":"EdDSA","use":"sig"}]}`
	if got := mustJSON(t, upstreamv1.JWKS{Keys: []upstreamv1.JWK{k}}); got != want {
		t.Fatalf("JWKS\n got %s\nwant %s", got, want)
	}
	if back, err := k.PublicKey(); err != nil || !back.Equal(pub) {
		t.Fatalf("PublicKey = %x, %v", back, err)
	}
	bad := map[string]upstreamv1.JWK{
		"another curve":  {Kty: "OKP", Crv: "X25519", X: k.X},
		"another type":   {Kty: "EC", Crv: "P-256", X: k.X},
		"another alg":    {Kty: "OKP", Crv: "Ed25519", X: k.X, Alg: "ES256"},
		"short x":        {Kty: "OKP", Crv: "Ed25519", X: k.X[:20]},
		"padded x":       {Kty: "OKP", Crv: "Ed25519", X: k.X + "="},
		"standard alpha": {Kty: "OKP", Crv: "Ed25519", X: strings.NewReplacer("-", "+", "_", "/").Replace(k.X) + "+"},
	}
	for name, j := range bad {
		if _, err := j.PublicKey(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := bad["another type"].PublicKey(); !errors.Is(err, upstreamv1.ErrNotEd25519) {
		t.Errorf("another type: %v, want ErrNotEd25519", err)
	}
}

func TestErrorBodyForm(t *testing.T) {
	msg, yes, detail := "No window.", true, "gone"
	for _, tt := range []struct {
		body upstreamv1.ErrorBody
		want string
	}{
		{upstreamv1.ErrorBody{ToolError: &msg}, `{"tool_error":"No window."}`},
		{upstreamv1.ErrorBody{Permanent: &yes, Detail: &detail}, `{"permanent":true,"detail":"gone"}`},
		{upstreamv1.ErrorBody{ToolError: &msg, Permanent: &yes, Detail: &detail}, `{"tool_error":"No window.","permanent":true,"detail":"gone"}`},
	} {
		if got := mustJSON(t, tt.body); got != tt.want {
			t.Errorf("got %s, want %s", got, tt.want)
		}
	}
	if upstreamv1.MaxToolErrorBytes != 1024 || upstreamv1.AssertionHeader != "Toolgate-Assertion" || upstreamv1.JWKSPath != "/.well-known/jwks.json" ||
		upstreamv1.MetaAssertion != "dev.toolgate/assertion" || upstreamv1.DefaultIssuer != "toolgate" || upstreamv1.Algorithm != "EdDSA" {
		t.Fatal("a contract constant changed")
	}
}
