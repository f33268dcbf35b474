package jwks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/internal/jwks"
	"github.com/toolgate/toolgate/internal/jwks/jwkstest"
)

// header is a token's header as Set.Key sees it.
func header(k *jwkstest.Key) *jwt.Token {
	t := jwt.New(k.Method)
	t.Header["kid"] = k.KID
	return t
}

// eventually polls cond until it holds, failing the test after 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logBuffer collects log lines from several goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func remote(t *testing.T, o jwks.RemoteOptions) *jwks.Set {
	t.Helper()
	s, err := jwks.NewRemote(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestRemoteSetAcceptsARotatedKeyWithoutRestart(t *testing.T) {
	k1, k2 := jwkstest.NewKey("k1", "ES256"), jwkstest.NewKey("k2", "EdDSA")
	idp := jwkstest.New(t, k1)
	s := remote(t, jwks.RemoteOptions{Issuer: idp.Issuer(), UnknownKIDRefresh: time.Hour})
	ctx := context.Background()

	// The first Key waits for the first fetch instead of refusing.
	if _, _, err := s.Key(ctx, header(k1)); err != nil {
		t.Fatal(err)
	}
	if d, j := idp.DiscoveryFetches(), idp.JWKSFetches(); d != 1 || j != 1 {
		t.Fatalf("discovery fetched %d times, key set %d times; want 1 and 1", d, j)
	}
	// The provider rotates: k2 is published and signs.
	idp.Publish(k1, k2)
	kid, key, err := s.Key(ctx, header(k2))
	if err != nil || kid != "k2" {
		t.Fatalf("rotated key: %q %v", kid, err)
	}
	if !s.Holds("k2", key) || s.Holds("k1", key) {
		t.Error("Holds does not tell k2 from k1")
	}
	if j := idp.JWKSFetches(); j != 2 {
		t.Fatalf("key set fetched %d times, want 2 (one for the unknown kid)", j)
	}
	// Another unknown kid within the interval fetches nothing.
	if _, _, err := s.Key(ctx, header(jwkstest.NewKey("k3", "ES256"))); !errors.Is(err, jwks.ErrUnknownKey) {
		t.Fatalf("unpublished key: %v", err)
	}
	if j := idp.JWKSFetches(); j != 2 {
		t.Fatalf("key set fetched %d times after a second unknown kid, want still 2", j)
	}
}

// A flood of tokens with garbage kids, from many goroutines at once,
// costs the provider at most one fetch per interval, and nobody queues.
func TestUnknownKIDFloodFetchesAtMostOncePerInterval(t *testing.T) {
	k1 := jwkstest.NewKey("k1", "ES256")
	idp := jwkstest.New(t, k1)
	s := remote(t, jwks.RemoteOptions{URL: idp.JWKSURL(), UnknownKIDRefresh: time.Hour})
	ctx := context.Background()
	if _, _, err := s.Key(ctx, header(k1)); err != nil {
		t.Fatal(err)
	}
	before := idp.JWKSFetches()
	var wg sync.WaitGroup
	errs := make(chan error, 64*25)
	for g := range 64 {
		wg.Go(func() {
			for i := range 25 {
				tok := jwt.New(jwt.SigningMethodES256)
				tok.Header["kid"] = fmt.Sprintf("garbage-%d-%d", g, i)
				if _, _, err := s.Key(ctx, tok); !errors.Is(err, jwks.ErrUnknownKey) {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("garbage kid: %v", err)
	}
	if n := idp.JWKSFetches() - before; n > 1 {
		t.Fatalf("1600 garbage kids made %d fetches, want at most 1", n)
	}
	if idp.DiscoveryFetches() != 0 {
		t.Error("a jwks_url set fetched a discovery document")
	}
	// The real key still verifies.
	if _, _, err := s.Key(ctx, header(k1)); err != nil {
		t.Fatal(err)
	}
}

// Right after a rotation, a burst of requests with the new kid: the
// first fetches, those arriving during the (slow) fetch wait for it, and
// every one is accepted with one fetch.
func TestBurstAfterRotationWaitsForOneFetch(t *testing.T) {
	k1, k2 := jwkstest.NewKey("k1", "ES256"), jwkstest.NewKey("k2", "ES256")
	idp := jwkstest.New(t, k1)
	s := remote(t, jwks.RemoteOptions{URL: idp.JWKSURL(), UnknownKIDRefresh: time.Hour})
	ctx := context.Background()
	if _, _, err := s.Key(ctx, header(k1)); err != nil {
		t.Fatal(err)
	}
	idp.Publish(k1, k2)
	idp.SetDelay(300 * time.Millisecond)
	before := idp.JWKSFetches()
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 32 {
		wg.Go(func() {
			if _, _, err := s.Key(ctx, header(k2)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("new kid refused during the burst: %v", err)
	}
	if n := idp.JWKSFetches() - before; n != 1 {
		t.Fatalf("the burst made %d fetches, want 1", n)
	}
}

// The caller whose unknown kid started a fetch hangs up: the fetch is not
// cut short, and the rotated key is there for everyone after it.
func TestFetchOutlivesTheCallerThatStartedIt(t *testing.T) {
	k1, k2 := jwkstest.NewKey("k1", "ES256"), jwkstest.NewKey("k2", "ES256")
	idp := jwkstest.New(t, k1)
	s := remote(t, jwks.RemoteOptions{URL: idp.JWKSURL(), UnknownKIDRefresh: time.Hour})
	if _, _, err := s.Key(context.Background(), header(k1)); err != nil {
		t.Fatal(err)
	}
	idp.Publish(k1, k2)
	idp.SetDelay(300 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, _, err := s.Key(ctx, header(k2)); done <- err }() // starts the fetch, then hangs up
	eventually(t, "the fetch reached the provider", func() bool { return idp.JWKSFetches() == 2 })
	cancel() // the provider answers 300 ms after the fetch arrived
	<-done
	// The fetch completes despite its starter hanging up.
	eventually(t, "the rotated key is held", func() bool {
		_, _, err := s.Key(context.Background(), header(k2))
		return err == nil
	})
	if n := idp.JWKSFetches(); n != 2 {
		t.Fatalf("key set fetched %d times, want 2", n)
	}
}

func TestDiscoveryWithDuplicateMembersIsRefused(t *testing.T) {
	k1 := jwkstest.NewKey("k1", "ES256")
	keys := jwkstest.New(t, k1)
	var base string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// A lenient decoder would take the last jwks_uri.
		fmt.Fprintf(w, `{"issuer":%q,"jwks_uri":"http://127.0.0.1:1/nothing","jwks_uri":%q}`, base, keys.JWKSURL())
	}))
	defer srv.Close()
	base = srv.URL
	s := remote(t, jwks.RemoteOptions{Issuer: srv.URL, UnknownKIDRefresh: time.Second})
	if _, _, err := s.Key(context.Background(), header(k1)); !errors.Is(err, jwks.ErrNotLoaded) {
		t.Fatalf("Key = %v, want ErrNotLoaded", err)
	}
	if keys.JWKSFetches() != 0 {
		t.Fatal("followed a discovery document with duplicate members")
	}
}

func TestDiscoveryNamingAnotherIssuerIsRefused(t *testing.T) {
	k1 := jwkstest.NewKey("k1", "ES256")
	idp := jwkstest.New(t, k1)
	idp.SetDiscoveryIssuer("https://evil.example")
	var logs logBuffer
	s := remote(t, jwks.RemoteOptions{Issuer: idp.Issuer(), UnknownKIDRefresh: time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if _, _, err := s.Key(context.Background(), header(k1)); !errors.Is(err, jwks.ErrNotLoaded) {
		t.Fatalf("Key = %v, want ErrNotLoaded", err)
	}
	if s.Loaded() {
		t.Fatal("loaded keys from a discovery document that names another issuer")
	}
	if idp.JWKSFetches() != 0 {
		t.Fatal("fetched the key set a foreign discovery document pointed at")
	}
	if !strings.Contains(logs.String(), `names the issuer \"https://evil.example\"`) {
		t.Errorf("the log does not say why: %s", logs.String())
	}
}

func TestTrailingSlashIssuerMustMatchExactly(t *testing.T) {
	k1 := jwkstest.NewKey("k1", "ES256")
	idp := jwkstest.New(t, k1)
	// Configured with a trailing slash, the document (without) is another
	// issuer: OpenID Connect Discovery wants them identical.
	s := remote(t, jwks.RemoteOptions{Issuer: idp.Issuer() + "/", UnknownKIDRefresh: time.Second})
	if _, _, err := s.Key(context.Background(), header(k1)); !errors.Is(err, jwks.ErrNotLoaded) {
		t.Fatalf("Key = %v, want ErrNotLoaded", err)
	}
	if idp.DiscoveryFetches() == 0 {
		t.Fatal("the discovery document was not asked for")
	}
}

// A key the provider stops publishing stops verifying at the next
// refresh, and Holds says so (the token cache relies on it).
func TestRemovedKeyIsNotHeldAfterRefresh(t *testing.T) {
	k1, k2 := jwkstest.NewKey("k1", "ES256"), jwkstest.NewKey("k2", "ES256")
	idp := jwkstest.New(t, k1, k2)
	s := remote(t, jwks.RemoteOptions{URL: idp.JWKSURL(), Refresh: 50 * time.Millisecond, UnknownKIDRefresh: time.Hour})
	ctx := context.Background()
	_, key, err := s.Key(ctx, header(k1))
	if err != nil {
		t.Fatal(err)
	}
	idp.Publish(k2)
	eventually(t, "the retired key is no longer held", func() bool { return !s.Holds("k1", key) })
	if _, _, err := s.Key(ctx, header(k1)); !errors.Is(err, jwks.ErrUnknownKey) {
		t.Fatalf("retired key: %v", err)
	}
	if _, _, err := s.Key(ctx, header(k2)); err != nil {
		t.Fatalf("the remaining key: %v", err)
	}
}

func TestFailedRefreshKeepsTheKeysFetchedLast(t *testing.T) {
	k1 := jwkstest.NewKey("k1", "ES256")
	idp := jwkstest.New(t, k1)
	s := remote(t, jwks.RemoteOptions{URL: idp.JWKSURL(), Refresh: 20 * time.Millisecond, UnknownKIDRefresh: time.Hour})
	ctx := context.Background()
	_, key, err := s.Key(ctx, header(k1))
	if err != nil {
		t.Fatal(err)
	}
	idp.SetStatus(http.StatusServiceUnavailable)
	n := idp.JWKSFetches()
	eventually(t, "two refreshes failed", func() bool { return idp.JWKSFetches() >= n+2 })
	if !s.Loaded() || !s.Holds("k1", key) {
		t.Fatal("a failed refresh dropped the keys")
	}
	if _, _, err := s.Key(ctx, header(k1)); err != nil {
		t.Fatal(err)
	}
}

// An unreachable provider at start: nothing verifies until its keys
// load, then they do, without a restart.
func TestProviderDownAtStartIsRetried(t *testing.T) {
	k1 := jwkstest.NewKey("k1", "ES256")
	idp := jwkstest.New(t, k1)
	idp.SetStatus(http.StatusServiceUnavailable)
	s := remote(t, jwks.RemoteOptions{Issuer: idp.Issuer(), UnknownKIDRefresh: time.Second})
	ctx := context.Background()
	if _, _, err := s.Key(ctx, header(k1)); !errors.Is(err, jwks.ErrNotLoaded) {
		t.Fatalf("Key = %v, want ErrNotLoaded", err)
	}
	idp.SetStatus(0)
	eventually(t, "the keys load", s.Loaded)
	if _, _, err := s.Key(ctx, header(k1)); err != nil {
		t.Fatal(err)
	}
}

func TestKeySetWithoutUsableKeysIsNotLoaded(t *testing.T) {
	idp := jwkstest.New(t) // publishes no key
	s := remote(t, jwks.RemoteOptions{URL: idp.JWKSURL(), UnknownKIDRefresh: time.Second})
	if _, _, err := s.Key(context.Background(), header(jwkstest.NewKey("k1", "ES256"))); !errors.Is(err, jwks.ErrNotLoaded) {
		t.Fatalf("Key = %v, want ErrNotLoaded", err)
	}
}

func TestOversizedKeySetIsRefused(t *testing.T) {
	k1 := jwkstest.NewKey("k1", "ES256")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"keys":[%s],"padding":"`, mustJSON(k1.JWK()))
		w.Write(bytes.Repeat([]byte("x"), jwks.MaxDocumentBytes))
		w.Write([]byte(`"}`))
	}))
	defer srv.Close()
	var logs logBuffer
	s := remote(t, jwks.RemoteOptions{URL: srv.URL, UnknownKIDRefresh: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if _, _, err := s.Key(context.Background(), header(k1)); !errors.Is(err, jwks.ErrNotLoaded) {
		t.Fatalf("Key = %v, want ErrNotLoaded", err)
	}
	if !strings.Contains(logs.String(), "longer than") {
		t.Errorf("the log does not say why: %s", logs.String())
	}
}

// An https issuer whose document points at plain http keys, or whose
// server redirects to plain http, gets no keys loaded.
func TestHTTPSIssuerNeverGetsKeysOverPlainHTTP(t *testing.T) {
	k1 := jwkstest.NewKey("k1", "ES256")
	plain := jwkstest.New(t, k1)
	var tlsURL string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, `{"issuer":%q,"jwks_uri":%q}`, tlsURL, plain.JWKSURL())
	})
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	tlsURL = srv.URL
	client := jwks.NewClient()
	client.Transport = srv.Client().Transport
	s := remote(t, jwks.RemoteOptions{Issuer: srv.URL, Client: client, UnknownKIDRefresh: time.Second})
	if _, _, err := s.Key(context.Background(), header(k1)); !errors.Is(err, jwks.ErrNotLoaded) {
		t.Fatalf("Key = %v, want ErrNotLoaded", err)
	}
	if plain.JWKSFetches() != 0 {
		t.Fatal("fetched keys over plain http for an https issuer")
	}

	redirect := httptest.NewTLSServer(http.RedirectHandler(plain.JWKSURL(), http.StatusFound))
	defer redirect.Close()
	client = jwks.NewClient()
	client.Transport = redirect.Client().Transport
	s = remote(t, jwks.RemoteOptions{URL: redirect.URL, Client: client, UnknownKIDRefresh: time.Second})
	if _, _, err := s.Key(context.Background(), header(k1)); !errors.Is(err, jwks.ErrNotLoaded) {
		t.Fatalf("Key after a downgrading redirect = %v, want ErrNotLoaded", err)
	}
	if plain.JWKSFetches() != 0 {
		t.Fatal("followed a redirect from https to plain http")
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
