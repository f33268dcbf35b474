package upstream

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
)

// testKey is one gateway key: it signs assertions and is published.
type testKey struct {
	kid  string
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey
}

func newTestKey(kid string) testKey {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		panic(err)
	}
	return testKey{kid, pub, priv}
}

func (k testKey) jwk() upstreamv1.JWK { return upstreamv1.NewJWK(k.kid, k.pub) }

func jwks(keys ...upstreamv1.JWK) []byte {
	b, err := json.Marshal(upstreamv1.JWKS{Keys: keys})
	if err != nil {
		panic(err)
	}
	return b
}

var testBody = []byte(`{"a":1}`)

// sign returns an assertion for the tool "t" over testBody; named false
// leaves out the kid.
func (k testKey) sign(t *testing.T, named bool) string {
	t.Helper()
	now := time.Now()
	c := &upstreamv1.Claims{Issuer: upstreamv1.DefaultIssuer, Audience: "t", Subject: "alice", Tenant: "acme", Roles: []string{},
		CallID: "c-1", RequestDigest: "sha256:doc", ArgsDigest: upstreamv1.ArgsDigest(testBody),
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Minute)), ID: "j"}
	tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
	if named {
		tok.Header["kid"] = k.kid
	}
	s, err := tok.SignedString(k.priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// gateway serves a key set that tests change, and reports each request.
type gateway struct {
	srv      *httptest.Server
	body     atomic.Pointer[[]byte] // nil: answer 503, as a gateway that is down
	requests chan int               // the number of each request, as it is answered
	n        atomic.Int32
	before   func(n int) // runs before request n is answered
}

func newGateway(t *testing.T) *gateway {
	g := &gateway{requests: make(chan int, 1000)}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n := int(g.n.Add(1))
		if g.before != nil {
			g.before(n)
		}
		if b := g.body.Load(); b != nil {
			w.Write(*b)
		} else {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		g.requests <- n
	}))
	t.Cleanup(g.srv.Close)
	return g
}

func (g *gateway) serve(b []byte) { g.body.Store(&b) }

// awaitRequest waits until request n has been answered.
func (g *gateway) awaitRequest(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-g.requests:
			if got >= n {
				return
			}
		case <-timeout:
			t.Fatalf("the key set was not fetched a %dth time", n)
		}
	}
}

func remoteVerifier(t *testing.T, g *gateway, o Options) *Verifier {
	t.Helper()
	o.JWKSURL, o.Audience = g.srv.URL+upstreamv1.JWKSPath, "t"
	v, err := NewVerifier(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	return v
}

func TestKeySetRules(t *testing.T) {
	a, b := newTestKey("a"), newTestKey("b")
	obj := func(j upstreamv1.JWK, extra string) string {
		s, _ := json.Marshal(j)
		return strings.TrimSuffix(string(s), "}") + extra + "}"
	}
	set := func(keys ...string) []byte { return []byte(`{"keys":[` + strings.Join(keys, ",") + `]}`) }
	rsa := `{"kty":"RSA","kid":"r","n":"sXch","e":"AQAB"}`
	ec := `{"kty":"EC","crv":"P-256","kid":"e","x":"AAAA","y":"AAAA"}`
	x25519 := `{"kty":"OKP","crv":"X25519","kid":"x","x":"` + a.jwk().X + `"}`
	good := []struct {
		name string
		doc  []byte
		kids []string
	}{
		{"the gateway's set", jwks(a.jwk(), b.jwk()), []string{"a", "b"}},
		{"other key types and curves are left out", set(rsa, ec, x25519, obj(a.jwk(), "")), []string{"a"}},
		{"encryption keys are left out", set(obj(a.jwk(), ""), strings.Replace(obj(b.jwk(), ""), `"use":"sig"`, `"use":"enc"`, 1)), []string{"a"}},
		{"key_ops without verify is left out", set(obj(a.jwk(), `,"key_ops":["verify"]`), obj(b.jwk(), `,"key_ops":["encrypt"]`)), []string{"a"}},
		{"no alg, no use", set(`{"kty":"OKP","crv":"Ed25519","kid":"a","x":"` + a.jwk().X + `"}`), []string{"a"}},
		{"one key without kid", set(`{"kty":"OKP","crv":"Ed25519","x":"` + a.jwk().X + `"}`), []string{""}},
	}
	for _, tt := range good {
		k, err := parseKeys(tt.doc)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if len(k) != len(tt.kids) {
			t.Errorf("%s: %d keys, want %v", tt.name, len(k), tt.kids)
		}
		for _, kid := range tt.kids {
			if _, ok := k[kid]; !ok {
				t.Errorf("%s: no key %q", tt.name, kid)
			}
		}
	}
	bad := map[string][]byte{
		"private key":            set(obj(a.jwk(), `,"d":"AAAA"`)),
		"symmetric key":          set(`{"kty":"oct","kid":"s","k":"c2VjcmV0"}`, obj(a.jwk(), "")),
		"another alg":            set(strings.Replace(obj(a.jwk(), ""), `"alg":"EdDSA"`, `"alg":"ES256"`, 1)),
		"x of 31 bytes":          set(`{"kty":"OKP","crv":"Ed25519","kid":"a","x":"` + a.jwk().X[:41] + `"}`),
		"duplicate kid":          set(obj(a.jwk(), ""), strings.Replace(obj(b.jwk(), ""), `"kid":"b"`, `"kid":"a"`, 1)),
		"two keys without kid":   set(`{"kty":"OKP","crv":"Ed25519","x":"`+a.jwk().X+`"}`, `{"kty":"OKP","crv":"Ed25519","x":"`+b.jwk().X+`"}`),
		"no Ed25519 key":         set(rsa, ec),
		"no keys":                []byte(`{"keys":[]}`),
		"not JSON":               []byte(`{"keys":`),
		"duplicate member names": []byte(`{"keys":[],"keys":[` + obj(a.jwk(), "") + `]}`),
	}
	for name, doc := range bad {
		if k, err := parseKeys(doc); err == nil {
			t.Errorf("%s: accepted %v", name, k)
		}
		if _, err := NewVerifier(Options{JWKS: doc, Audience: "t"}); err == nil {
			t.Errorf("%s: NewVerifier accepted it", name)
		}
	}
}

func TestAssertionWithoutKidNeedsASetOfOneKey(t *testing.T) {
	a, b := newTestKey("a"), newTestKey("b")
	one, _ := NewVerifier(Options{JWKS: jwks(a.jwk()), Audience: "t"})
	if _, err := one.Verify(context.Background(), a.sign(t, false), testBody); err != nil {
		t.Fatalf("a set of one key: %v", err)
	}
	two, _ := NewVerifier(Options{JWKS: jwks(a.jwk(), b.jwk()), Audience: "t"})
	if _, err := two.Verify(context.Background(), a.sign(t, false), testBody); !errors.Is(err, ErrInvalidAssertion) || !strings.Contains(err.Error(), "names no kid") {
		t.Fatalf("a set of two keys: %v", err)
	}
	if _, err := two.Verify(context.Background(), b.sign(t, true), testBody); err != nil {
		t.Fatalf("with kid: %v", err)
	}
}

// An assertion that arrives while the first fetch runs waits for it
// instead of being refused, and does not fetch again.
func TestVerifyWaitsForTheFirstFetch(t *testing.T) {
	k := newTestKey("k")
	g := newGateway(t)
	g.serve(jwks(k.jwk()))
	verifying := make(chan struct{})
	g.before = func(n int) {
		if n == 1 {
			select {
			case <-verifying:
			case <-time.After(10 * time.Second):
			}
		}
	}
	v := remoteVerifier(t, g, Options{UnknownKeyRefetch: time.Hour})
	v.keys.waiting = func() { close(verifying) }
	if _, err := v.Verify(context.Background(), k.sign(t, true), testBody); err != nil {
		t.Fatal(err)
	}
	if n := g.n.Load(); n != 1 {
		t.Fatalf("the key set was fetched %d times, want once", n)
	}
}

// A service that starts while the gateway is down: the first assertion
// with a kid fetches the keys at once, without waiting for the background
// retry; within UnknownKeyRefetch assertions fetch nothing more.
func TestGatewayDownAtStartIsFetchedByTheFirstAssertion(t *testing.T) {
	defer func(d time.Duration) { firstRetry = d }(firstRetry)
	firstRetry = time.Hour // only assertions can fetch in this test
	k := newTestKey("k")
	g := newGateway(t)
	v := remoteVerifier(t, g, Options{UnknownKeyRefetch: time.Hour})
	g.awaitRequest(t, 1)
	g.serve(jwks(k.jwk()))
	if _, err := v.Verify(context.Background(), k.sign(t, true), testBody); err != nil {
		t.Fatalf("the first assertion after the gateway came up: %v", err)
	}
	if n := g.n.Load(); n != 2 {
		t.Fatalf("the key set was fetched %d times, want 2", n)
	}
	// That fetch counts as the one of this UnknownKeyRefetch: unknown
	// kids fetch nothing more.
	for range 20 {
		if _, err := v.Verify(context.Background(), newTestKey("forged").sign(t, true), testBody); !errors.Is(err, ErrInvalidAssertion) {
			t.Fatalf("forged kid: %v", err)
		}
	}
	if n := g.n.Load(); n != 2 {
		t.Fatalf("the key set was fetched %d times after forged kids, want still 2", n)
	}
}

// While the gateway stays down, assertions fetch at most once per
// UnknownKeyRefetch and are refused as not loaded.
func TestGatewayStillDownRefusesWithoutHammering(t *testing.T) {
	defer func(d time.Duration) { firstRetry = d }(firstRetry)
	firstRetry = time.Hour
	k := newTestKey("k")
	g := newGateway(t)
	v := remoteVerifier(t, g, Options{UnknownKeyRefetch: time.Hour})
	for range 20 {
		if _, err := v.Verify(context.Background(), k.sign(t, true), testBody); !errors.Is(err, ErrInvalidAssertion) || !strings.Contains(err.Error(), "not loaded") {
			t.Fatalf("Verify = %v, want not loaded", err)
		}
	}
	if n := g.n.Load(); n != 2 {
		t.Fatalf("the key set was fetched %d times, want 2 (start, first assertion)", n)
	}
}

// The background retry loads a set that failed at start with no
// assertion asking.
func TestGatewayDownAtStartIsRetriedInTheBackground(t *testing.T) {
	defer func(d time.Duration) { firstRetry = d }(firstRetry)
	firstRetry = time.Millisecond
	k := newTestKey("k")
	g := newGateway(t)
	v := remoteVerifier(t, g, Options{UnknownKeyRefetch: time.Hour})
	g.awaitRequest(t, 1)
	g.serve(jwks(k.jwk()))
	g.awaitRequest(t, 2)
	waitLoaded(t, v.keys)
	if _, err := v.Verify(context.Background(), k.sign(t, true), testBody); err != nil {
		t.Fatal(err)
	}
	if n := g.n.Load(); n != 2 {
		t.Fatalf("the key set was fetched %d times, want 2", n)
	}
}

// waitLoaded waits until the answer of a fetch has been installed.
func waitLoaded(t *testing.T, s *keySet) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); s.cur.Load() == nil; {
		if time.Now().After(deadline) {
			t.Fatal("the key set did not load")
		}
		time.Sleep(time.Millisecond)
	}
}

// Fetched keys are refreshed every RefreshInterval: a key the gateway
// adds is known without an assertion asking, and one it removes is
// forgotten. A failed refresh keeps the keys fetched last.
func TestKeysAreRefreshedEveryRefreshInterval(t *testing.T) {
	a, b := newTestKey("a"), newTestKey("b")
	g := newGateway(t)
	g.serve(jwks(a.jwk()))
	var mu sync.Mutex
	next := map[int][]byte{}
	g.before = func(n int) {
		mu.Lock()
		defer mu.Unlock()
		if body, ok := next[n]; ok {
			if body == nil {
				g.body.Store(nil)
			} else {
				g.serve(body)
			}
		}
	}
	mu.Lock()
	next[3] = jwks(b.jwk()) // the second refresh sees a rotation
	next[4] = nil           // the third fails
	mu.Unlock()
	v := remoteVerifier(t, g, Options{RefreshInterval: 5 * time.Millisecond, UnknownKeyRefetch: time.Hour})
	g.awaitRequest(t, 5) // after the failed refresh, one more
	k := *v.keys.cur.Load()
	if _, ok := k["b"]; !ok || len(k) != 1 {
		t.Fatalf("keys after the rotation and a failed refresh: %v", k)
	}
	if n := g.n.Load(); n < 5 {
		t.Fatalf("fetched %d times", n)
	}
}

func TestKeySetLongerThanTheLimitIsRefused(t *testing.T) {
	defer func(d time.Duration) { firstRetry = d }(firstRetry)
	firstRetry = time.Hour
	k := newTestKey("k")
	set := jwks(k.jwk())
	pad := func(n int) []byte { return append(bytes.Repeat([]byte(" "), n-len(set)), set...) }

	at := newGateway(t)
	at.serve(pad(MaxJWKSBytes))
	if _, err := remoteVerifier(t, at, Options{}).Verify(context.Background(), k.sign(t, true), testBody); err != nil {
		t.Fatalf("a set of exactly MaxJWKSBytes: %v", err)
	}
	over := newGateway(t)
	over.serve(pad(MaxJWKSBytes + 1))
	if _, err := remoteVerifier(t, over, Options{}).Verify(context.Background(), k.sign(t, true), testBody); !errors.Is(err, ErrInvalidAssertion) {
		t.Fatalf("a set over MaxJWKSBytes: %v", err)
	}
}

func TestNoRedirectFromHTTPSToHTTP(t *testing.T) {
	defer func(d time.Duration) { firstRetry = d }(firstRetry)
	firstRetry = time.Hour
	k := newTestKey("k")
	plain := newGateway(t)
	plain.serve(jwks(k.jwk()))
	tls := httptest.NewTLSServer(http.RedirectHandler(plain.srv.URL, http.StatusFound))
	defer tls.Close()
	c := newClient()
	c.Transport = tls.Client().Transport
	s, err := remoteKeys(tls.URL, c, time.Hour, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.key(context.Background(), "k", true); !errors.Is(err, errNotLoaded) {
		t.Fatalf("key = %v, want not loaded", err)
	}
	if n := plain.n.Load(); n != 0 {
		t.Fatalf("the plain http server was asked %d times", n)
	}
	// Over https all the way, the same redirect is followed.
	tls2 := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/keys" {
			w.Write(jwks(k.jwk()))
			return
		}
		http.Redirect(w, r, "/keys", http.StatusFound)
	}))
	defer tls2.Close()
	c2 := newClient()
	c2.Transport = tls2.Client().Transport
	s2, _ := remoteKeys(tls2.URL, c2, time.Hour, time.Hour)
	defer s2.Close()
	if _, err := s2.key(context.Background(), "k", true); err != nil {
		t.Fatalf("https redirect: %v", err)
	}
}

func TestCloseStopsFetching(t *testing.T) {
	k := newTestKey("k")
	g := newGateway(t)
	g.serve(jwks(k.jwk()))
	v := remoteVerifier(t, g, Options{RefreshInterval: time.Millisecond})
	g.awaitRequest(t, 3)
	v.Close()
	select {
	case <-v.keys.done:
	default:
		t.Fatal("the fetching goroutine still runs after Close")
	}
	v.Close() // twice is fine
	// Keys already loaded stay usable; an unknown kid fetches nothing.
	if _, err := v.Verify(context.Background(), k.sign(t, true), testBody); err != nil {
		t.Fatal(err)
	}
	n := g.n.Load()
	if _, err := v.Verify(context.Background(), newTestKey("new").sign(t, true), testBody); !errors.Is(err, ErrInvalidAssertion) {
		t.Fatalf("unknown kid after Close: %v", err)
	}
	if got := g.n.Load(); got != n {
		t.Fatalf("an unknown kid fetched the set after Close (%d fetches, were %d)", got, n)
	}
	fixed, _ := NewVerifier(Options{JWKS: jwks(k.jwk()), Audience: "t"})
	fixed.Close()
}
