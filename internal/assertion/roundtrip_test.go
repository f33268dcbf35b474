package assertion_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
	"github.com/toolgate/toolgate/internal/assertion"
	"github.com/toolgate/toolgate/sdk/upstream"
)

func signer(t *testing.T, file string, published ...string) *assertion.Signer {
	t.Helper()
	if _, err := assertion.EnsureKey(file); err != nil {
		t.Fatal(err)
	}
	s, err := assertion.New(assertion.Options{Issuer: upstreamv1.DefaultIssuer, TTL: time.Minute, SigningKeyFile: file, PublishedKeyFiles: published})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var body = []byte(`{"service_id":"checkout"}`)

func call(tool string) upstreamv1.Claims {
	return upstreamv1.Claims{Audience: tool, Subject: "alice", Tenant: "acme", Roles: []string{"developer"},
		CallID: "c-1", SessionID: "s-1", RequestDigest: "sha256:doc", ArgsDigest: upstreamv1.ArgsDigest(body)}
}

// The gateway's assertion, verified by the SDK from its published JWKS.
func TestSDKVerifiesTheGatewaysAssertion(t *testing.T) {
	s := signer(t, filepath.Join(t.TempDir(), "k.pem"))
	tok, err := s.Sign(call("maintenance-window"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := upstream.NewVerifier(upstream.Options{JWKS: s.JWKS(), Audience: "maintenance-window"})
	if err != nil {
		t.Fatal(err)
	}
	id, err := v.Verify(context.Background(), tok, body)
	if err != nil {
		t.Fatal(err)
	}
	if id.Subject != "alice" || id.Tenant != "acme" || !id.HasRole("developer") || id.CallID != "c-1" || id.SessionID != "s-1" ||
		id.RequestDigest != "sha256:doc" || id.Issuer != upstreamv1.DefaultIssuer || id.ID == "" || id.Expires.Sub(id.IssuedAt) != time.Minute {
		t.Fatalf("identity %+v", id)
	}
	if _, err := v.Verify(context.Background(), tok, []byte(`{"service_id":"payments"}`)); err != upstream.ErrBodyMismatch {
		t.Fatalf("another body: %v", err)
	}
	// A caller without roles is sent [], never null.
	c := call("maintenance-window")
	c.Roles = nil
	tok, _ = s.Sign(c)
	raw := map[string]any{}
	if _, _, err := jwt.NewParser().ParseUnverified(tok, jwt.MapClaims(raw)); err != nil {
		t.Fatal(err)
	}
	if r, ok := raw["roles"].([]any); !ok || len(r) != 0 {
		t.Fatalf("roles = %#v, want []", raw["roles"])
	}
}

// Anyone can verify with golang-jwt and the public types alone.
func TestGolangJWTVerifiesWithThePublicTypes(t *testing.T) {
	s := signer(t, filepath.Join(t.TempDir(), "k.pem"))
	tok, err := s.Sign(call("maintenance-window"))
	if err != nil {
		t.Fatal(err)
	}
	var set upstreamv1.JWKS
	if err := json.Unmarshal(s.JWKS(), &set); err != nil {
		t.Fatal(err)
	}
	var c upstreamv1.Claims
	_, err = jwt.ParseWithClaims(tok, &c, func(tk *jwt.Token) (any, error) {
		for _, k := range set.Keys {
			if k.Kid == tk.Header["kid"] {
				return k.PublicKey()
			}
		}
		return nil, jwt.ErrTokenUnverifiable
	}, jwt.WithValidMethods([]string{upstreamv1.Algorithm}), jwt.WithIssuer(upstreamv1.DefaultIssuer),
		jwt.WithAudience("maintenance-window"), jwt.WithExpirationRequired(), jwt.WithIssuedAt())
	if err != nil {
		t.Fatal(err)
	}
	want := call("maintenance-window")
	if c.Subject != want.Subject || c.Tenant != want.Tenant || c.ArgsDigest != upstreamv1.ArgsDigest(body) || c.Issuer != upstreamv1.DefaultIssuer ||
		c.NotBefore == nil || !c.NotBefore.Equal(c.IssuedAt.Time) {
		t.Fatalf("claims %+v", c)
	}
}

// The gateway rotates its key: a service that fetched the old set takes
// the new key at the first assertion naming it, and assertions signed
// before the rotation still verify while the old key is published.
func TestSDKFollowsAKeyRotation(t *testing.T) {
	dir := t.TempDir()
	oldFile := filepath.Join(dir, "old.pem")
	old := signer(t, oldFile)
	var published atomic.Pointer[[]byte]
	b := old.JWKS()
	published.Store(&b)
	var fetches atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+upstreamv1.JWKSPath, func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		w.Write(*published.Load())
	})
	gw := httptest.NewServer(mux)
	defer gw.Close()
	v, err := upstream.NewVerifier(upstream.Options{JWKSURL: gw.URL + upstreamv1.JWKSPath, Audience: "t", UnknownKeyRefetch: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	before, _ := old.Sign(call("t"))
	if _, err := v.Verify(context.Background(), before, body); err != nil {
		t.Fatal(err)
	}

	next := signer(t, filepath.Join(dir, "new.pem"), oldFile)
	b = next.JWKS()
	published.Store(&b)
	after, _ := next.Sign(call("t"))
	if _, err := v.Verify(context.Background(), after, body); err != nil {
		t.Fatalf("an assertion of the new key: %v", err)
	}
	if _, err := v.Verify(context.Background(), before, body); err != nil {
		t.Fatalf("an assertion of the previous key, still published: %v", err)
	}
	if n := fetches.Load(); n != 2 {
		t.Fatalf("the JWKS was fetched %d times, want 2", n)
	}
}
