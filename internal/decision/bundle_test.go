package decision_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/bundle"

	"github.com/toolgate/toolgate/internal/decision"
	"github.com/toolgate/toolgate/internal/decision/bundletest"
)

const (
	bAvailability = "package toolgate.availability\n\nallow := true\n"
	bAuthzAllow   = "package toolgate.authz\n\ndecision := {\"allow\": true, \"reasons\": [\"from the bundle\"]}\n"
	bAuthzDeny    = "package toolgate.authz\n\ndecision := {\"allow\": false}\n"
)

func pack(authz string) map[string][]byte {
	return map[string][]byte{"availability.rego": []byte(bAvailability), "authz.rego": []byte(authz)}
}

func build(t *testing.T, files map[string][]byte, rev string, s *bundletest.Signer) []byte {
	t.Helper()
	raw, err := bundletest.Build(files, rev, s)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func verification(s *bundletest.Signer) *bundle.VerificationConfig {
	return bundle.NewVerificationConfig(map[string]*bundle.KeyConfig{
		s.KeyID: {Key: s.PublicPEM, Algorithm: "RS256"},
	}, "", "", nil)
}

func allowed(t *testing.T, e *decision.Engine) bool {
	t.Helper()
	rev, err := e.Current()
	if err != nil {
		t.Fatal(err)
	}
	d, err := rev.Decide(context.Background(), ast.MustParseTerm(`{"tool": {"name": "read-file"}}`).Value)
	if err != nil {
		t.Fatal(err)
	}
	return d.Allow
}

func TestBundleFilesLoadAndOnlyVerifiedOnesReplaceTheServingRevision(t *testing.T) {
	signer, err := bundletest.NewSigner("ci")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := bundletest.NewSigner("ci")
	good := build(t, pack(bAuthzAllow), "r1", signer)
	next := build(t, pack(bAuthzDeny), "r2", signer)
	tampered, err := bundletest.Tamper(next, "authz.rego", []byte(bAuthzAllow+"\n# changed\n"))
	if err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(t.TempDir(), "policy.tar.gz")
	e := decision.NewEngine(decision.Options{Bundle: &decision.BundleOptions{Location: file, Verification: verification(signer)}})
	write := func(raw []byte) { must(t, os.WriteFile(file, raw, 0o644)) }

	write(good)
	must(t, e.Load(context.Background()))
	if rev, _ := e.Current(); rev.ID() != "r1" || !allowed(t, e) {
		t.Fatalf("serving %s, want the manifest revision r1", rev.ID())
	}
	for _, tc := range []struct {
		name string
		raw  []byte
		want string
	}{
		{"a tampered bundle", tampered, "bundle rejected"},
		{"an unsigned bundle", build(t, pack(bAuthzDeny), "r2", nil), "missing .signatures.json"},
		{"a bundle signed with another key", build(t, pack(bAuthzDeny), "r2", other), "bundle rejected"},
		{"a signed bundle that breaks the contract", build(t, map[string][]byte{"authz.rego": []byte(bAuthzDeny)}, "r2", signer), "availability.allow is missing"},
	} {
		write(tc.raw)
		err := e.Load(context.Background())
		var le *decision.LoadError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Load = %v, want a LoadError with %q", tc.name, err, tc.want)
		}
		if rev, _ := e.Current(); rev.ID() != "r1" || !allowed(t, e) {
			t.Errorf("%s: serving %s, want r1 to keep serving", tc.name, rev.ID())
		}
		if st := e.Status(); st.LastError == "" {
			t.Errorf("%s: status has no last error", tc.name)
		}
	}
	write(next)
	must(t, e.Load(context.Background()))
	if rev, _ := e.Current(); rev.ID() != "r2" || allowed(t, e) || e.Status().LastError != "" {
		t.Fatalf("after a good bundle: serving %s", rev.ID())
	}
}

func TestUnsignedBundlesLoadWhenNoKeysAreConfigured(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.tar.gz")
	must(t, os.WriteFile(file, build(t, pack(bAuthzAllow), "u1", nil), 0o644))
	e := decision.NewEngine(decision.Options{Bundle: &decision.BundleOptions{Location: file}})
	must(t, e.Load(context.Background()))
	if rev, _ := e.Current(); rev.ID() != "u1" {
		t.Fatalf("serving %s", rev.ID())
	}
}

// bundleServer serves the bundle set last, with an ETag, and answers 304
// to a matching If-None-Match.
type bundleServer struct {
	mu       sync.Mutex
	raw      []byte
	etag     string
	fail     bool
	gets     atomic.Int32
	notModif atomic.Int32
}

func (b *bundleServer) set(raw []byte, etag string) {
	b.mu.Lock()
	b.raw, b.etag = raw, etag
	b.mu.Unlock()
}

func (b *bundleServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	raw, etag, fail := b.raw, b.etag, b.fail
	b.mu.Unlock()
	b.gets.Add(1)
	if fail {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	if r.Header.Get("If-None-Match") == etag {
		b.notModif.Add(1)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("ETag", etag)
	w.Write(raw)
}

func TestBundleServerIsPolledWithETagsAndFailuresKeepTheRevision(t *testing.T) {
	srv := &bundleServer{}
	srv.set(build(t, pack(bAuthzAllow), "r1", nil), `"r1"`)
	ts := httptest.NewServer(srv) // loopback
	defer ts.Close()
	e := decision.NewEngine(decision.Options{Bundle: &decision.BundleOptions{
		Location: ts.URL + "/bundles/toolgate.tar.gz", PollInterval: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
	}})
	must(t, e.Load(context.Background()))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Watch(ctx) }()
	defer func() { cancel(); <-done }()

	waitFor(t, func() bool { return srv.notModif.Load() >= 2 }, "polls answered 304")
	srv.set(build(t, pack(bAuthzDeny), "r2", nil), `"r2"`)
	waitFor(t, func() bool { rev, _ := e.Current(); return rev.ID() == "r2" }, "revision r2 from the server")

	srv.mu.Lock()
	srv.fail = true
	srv.mu.Unlock()
	n := srv.gets.Load()
	waitFor(t, func() bool { return srv.gets.Load() >= n+3 }, "polls while the server fails")
	if rev, _ := e.Current(); rev.ID() != "r2" || e.Status().LastError == "" {
		t.Fatalf("while the server fails: serving %s, status %+v", rev.ID(), e.Status())
	}
	srv.mu.Lock()
	srv.fail = false
	srv.mu.Unlock()
	srv.set(build(t, pack(bAuthzAllow), "r3", nil), `"r3"`)
	waitFor(t, func() bool { rev, _ := e.Current(); return rev.ID() == "r3" }, "revision r3 after the server recovered")
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
