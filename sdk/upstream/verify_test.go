package upstream_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
	"github.com/toolgate/toolgate/sdk/upstream"
	"github.com/toolgate/toolgate/sdk/upstream/upstreamtest"
)

var body = []byte(`{"service_id":"checkout"}`)

func alice() upstream.Identity {
	return upstream.Identity{Audience: "maintenance-window", Subject: "alice", Tenant: "acme", Roles: []string{"developer"}}
}

func verifier(t *testing.T, iss *upstreamtest.Issuer) *upstream.Verifier {
	t.Helper()
	v, err := upstream.NewVerifier(upstream.Options{JWKS: iss.JWKS(), Audience: "maintenance-window"})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestVerifyAcceptsTheGatewaysAssertion(t *testing.T) {
	iss := upstreamtest.NewIssuer()
	tok := iss.Sign(upstream.Identity{Audience: "maintenance-window", Subject: "alice", Tenant: "acme", Roles: []string{"developer"},
		CallID: "c-1", SessionID: "s-1", RequestDigest: "sha256:doc"}, body)
	id, err := verifier(t, iss).Verify(context.Background(), tok, body)
	if err != nil {
		t.Fatal(err)
	}
	if id.Subject != "alice" || id.Tenant != "acme" || !id.HasRole("developer") || id.HasRole("admin") ||
		id.CallID != "c-1" || id.SessionID != "s-1" || id.RequestDigest != "sha256:doc" || id.Audience != "maintenance-window" {
		t.Fatalf("identity = %+v", id)
	}
}

func TestVerifyRejectsForgedAndStaleAssertions(t *testing.T) {
	iss := upstreamtest.NewIssuer()
	good := iss.Sign(alice(), body)
	other := upstreamtest.NewIssuer()
	past := time.Now().Add(-time.Hour)
	expired := alice()
	expired.IssuedAt, expired.Expires = past, past.Add(time.Minute)
	wrongAud := alice()
	wrongAud.Audience = "another-tool"
	wrongIss := alice()
	wrongIss.Issuer = "someone-else"
	noSub := alice()
	noSub.Subject = ""
	parts := strings.Split(good, ".")
	tamperedPayload := parts[0] + "." + strings.Replace(parts[1], parts[1][10:14], "AAAA", 1) + "." + parts[2]
	unsigned := "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0." + parts[1] + "."

	tests := []struct {
		name, token string
		body        []byte
		want        error
	}{
		{"no assertion", "", body, upstream.ErrInvalidAssertion},
		{"tampered claims", tamperedPayload, body, upstream.ErrInvalidAssertion},
		{"tampered signature", parts[0] + "." + parts[1] + "." + strings.Repeat("A", len(parts[2])), body, upstream.ErrInvalidAssertion},
		{"alg none", unsigned, body, upstream.ErrInvalidAssertion},
		{"signed by another key", other.Sign(alice(), body), body, upstream.ErrInvalidAssertion},
		{"expired", iss.Sign(expired, body), body, upstream.ErrInvalidAssertion},
		{"meant for another tool", iss.Sign(wrongAud, body), body, upstream.ErrInvalidAssertion},
		{"another issuer", iss.Sign(wrongIss, body), body, upstream.ErrInvalidAssertion},
		{"no subject", iss.Sign(noSub, body), body, upstream.ErrInvalidAssertion},
		{"replayed with other arguments", good, []byte(`{"service_id":"payments"}`), upstream.ErrBodyMismatch},
		{"garbage", "not.a.jwt", body, upstream.ErrInvalidAssertion},
	}
	v := verifier(t, iss)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := v.Verify(context.Background(), tt.token, tt.body)
			if !errors.Is(err, tt.want) || id != nil {
				t.Fatalf("Verify = %+v, %v; want %v", id, err, tt.want)
			}
		})
	}
}

func TestVerifierFetchesRotatedKeys(t *testing.T) {
	current := upstreamtest.NewIssuer()
	var fetches atomic.Int32
	var jwks atomic.Pointer[[]byte]
	k := current.JWKS()
	jwks.Store(&k)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		w.Write(*jwks.Load())
	}))
	defer srv.Close()
	v, err := upstream.NewVerifier(upstream.Options{JWKSURL: srv.URL, Audience: "maintenance-window", UnknownKeyRefetch: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if _, err := v.Verify(context.Background(), current.Sign(alice(), body), body); err != nil {
		t.Fatal(err)
	}
	// The gateway rotates: a new key signs, and the set now holds it. The
	// first assertion naming it fetches the set again.
	next := upstreamtest.NewIssuer()
	k2 := next.JWKS()
	jwks.Store(&k2)
	if _, err := v.Verify(context.Background(), next.Sign(alice(), body), body); err != nil {
		t.Fatalf("rotated key not fetched: %v", err)
	}
	if n := fetches.Load(); n != 2 {
		t.Fatalf("JWKS fetched %d times, want 2", n)
	}
	// Forged key ids within UnknownKeyRefetch fetch nothing more.
	for range 50 {
		if _, err := v.Verify(context.Background(), upstreamtest.NewIssuer().Sign(alice(), body), body); !errors.Is(err, upstream.ErrInvalidAssertion) {
			t.Fatalf("forged key: %v", err)
		}
	}
	if n := fetches.Load(); n != 2 {
		t.Fatalf("JWKS fetched %d times after forged key ids, want still 2", n)
	}
}

// Assertions a lenient decoder would take, correctly signed: a crit
// header, a duplicated claim. The control shows the rest is valid.
func TestVerifyRefusesCritAndDuplicateClaims(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	set, _ := json.Marshal(upstreamv1.JWKS{Keys: []upstreamv1.JWK{upstreamv1.NewJWK("k1", pub)}})
	v, err := upstream.NewVerifier(upstream.Options{JWKS: set, Audience: "maintenance-window"})
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	now := time.Now().Unix()
	claims := fmt.Sprintf(`"iss":"toolgate","aud":"maintenance-window","sub":"alice","call_id":"c-1","request_digest":"sha256:doc","args_digest":"sha256:%x","iat":%d,"exp":%d}`,
		sum, now, now+60)
	seg := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	signed := func(header, payload string) string {
		in := seg(header) + "." + seg(payload)
		sig, err := jwt.SigningMethodEdDSA.Sign(in, priv)
		if err != nil {
			t.Fatal(err)
		}
		return in + "." + base64.RawURLEncoding.EncodeToString(sig)
	}
	const hdr = `{"alg":"EdDSA","kid":"k1"}`
	if _, err := v.Verify(context.Background(), signed(hdr, `{"tenant":"acme",`+claims), body); err != nil {
		t.Fatalf("control refused: %v", err)
	}
	for name, tok := range map[string]string{
		"crit":             signed(`{"alg":"EdDSA","kid":"k1","crit":["x-bind"],"x-bind":1}`, `{"tenant":"acme",`+claims),
		"duplicate tenant": signed(hdr, `{"tenant":"globex","tenant":"acme",`+claims),
		"duplicate kid":    signed(`{"alg":"EdDSA","kid":"other","kid":"k1"}`, `{"tenant":"acme",`+claims),
	} {
		if _, err := v.Verify(context.Background(), tok, body); !errors.Is(err, upstream.ErrInvalidAssertion) {
			t.Errorf("%s: Verify = %v, want ErrInvalidAssertion", name, err)
		}
	}
}

func handler(t *testing.T, iss *upstreamtest.Issuer) http.Handler {
	type args struct {
		ServiceID string `json:"service_id"`
	}
	return upstream.Handle(verifier(t, iss), func(_ context.Context, id *upstream.Identity, a args) (any, error) {
		switch a.ServiceID {
		case "checkout":
			return "Sunday 02:00 for " + id.Subject, nil
		case "object":
			return map[string]any{"minutes": 30}, nil
		case "none":
			return nil, &upstream.ToolError{Message: "No maintenance window is scheduled."}
		case "gone":
			return nil, upstream.Permanent("service decommissioned")
		}
		return nil, errors.New("database on fire at 10.0.0.7")
	})
}

func TestHandleAnswersInTheGatewaysShapes(t *testing.T) {
	iss := upstreamtest.NewIssuer()
	h := handler(t, iss)
	tests := []struct {
		name   string
		req    func() *http.Request
		status int
		body   string
	}{
		{"string result", func() *http.Request { return iss.Request("/", alice(), map[string]any{"service_id": "checkout"}) }, 200, `"Sunday 02:00 for alice"`},
		{"object result", func() *http.Request { return iss.Request("/", alice(), map[string]any{"service_id": "object"}) }, 200, `{"minutes":30}`},
		{"model-facing error", func() *http.Request { return iss.Request("/", alice(), map[string]any{"service_id": "none"}) }, 422, `{"tool_error":"No maintenance window is scheduled."}`},
		{"permanent failure", func() *http.Request { return iss.Request("/", alice(), map[string]any{"service_id": "gone"}) }, 409, `{"permanent":true,"detail":"permanent failure: service decommissioned"}`},
		{"internal error says nothing", func() *http.Request { return iss.Request("/", alice(), map[string]any{"service_id": "x"}) }, 500, `{"error":"internal"}`},
		{"unknown argument", func() *http.Request {
			return iss.Request("/", alice(), map[string]any{"service_id": "checkout", "tenant": "globex"})
		}, 400, `{"error":"invalid arguments"}`},
		{"no assertion", func() *http.Request {
			r := iss.Request("/", alice(), map[string]any{"service_id": "checkout"})
			r.Header.Del(upstream.AssertionHeader)
			return r
		}, 401, `{"error":"unauthenticated"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, tt.req())
			b, _ := io.ReadAll(rec.Body)
			if rec.Code != tt.status || string(b) != tt.body {
				t.Fatalf("got %d %s, want %d %s", rec.Code, b, tt.status, tt.body)
			}
		})
	}
}

func TestDecodeIsStrict(t *testing.T) {
	type args struct {
		A string `json:"a"`
	}
	for _, in := range []string{`{"a":"x","a":"y"}`, `{"a":"x"} {}`, `["a"]`, `{"A":"x"}`, "{\"a\":\"\xff\"}", ``} {
		var a args
		if err := upstream.Decode([]byte(in), &a); err == nil {
			t.Errorf("Decode(%q) accepted", in)
		}
	}
}
