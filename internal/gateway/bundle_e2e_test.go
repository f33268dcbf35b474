package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/decision/bundletest"
)

// rotatingServer serves one bundle at a time with its revision as ETag.
type rotatingServer struct {
	mu   sync.Mutex
	raw  []byte
	etag string
}

func (s *rotatingServer) set(raw []byte, etag string) {
	s.mu.Lock()
	s.raw, s.etag = raw, etag
	s.mu.Unlock()
}

func (s *rotatingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	raw, etag := s.raw, s.etag
	s.mu.Unlock()
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("ETag", etag)
	w.Write(raw)
}

// A loopback bundle server rotates signed revisions of the shipped pack
// (with a tampered and an unsigned bundle in between) while clients call
// tools without pause: no request fails, rejected bundles never serve, and
// every decision names a revision that was really served.
func TestBundleServerRotatesRevisionsUnderLoadWithNoFailedRequest(t *testing.T) {
	t.Parallel()
	signer, err := bundletest.NewSigner("ci")
	must(t, err)
	files, err := bundletest.ReadDir("../../policies")
	must(t, err)
	bundleOf := func(rev string, s *bundletest.Signer) []byte {
		raw, err := bundletest.Build(files, rev, s)
		must(t, err)
		return raw
	}
	srv := &rotatingServer{}
	srv.set(bundleOf("r0", signer), `"r0"`)
	ts := httptest.NewServer(srv)
	defer ts.Close()
	keyFile := filepath.Join(t.TempDir(), "bundle.pub")
	must(t, os.WriteFile(keyFile, []byte(signer.PublicPEM), 0o644))

	h := start(t, func(s *setup) {
		s.policySource = fmt.Sprintf("  bundle: %s/bundles/toolgate.tar.gz\n  poll_interval: 100ms\n  poll_max_backoff: 400ms\n"+
			"  signing:\n    keys:\n      ci:\n        key_file: %s\n", ts.URL, keyFile)
	})
	admin := h.token("acme", "pat", "policy-admin")
	if p := h.do("GET", "/v1/policy", admin, nil); p.str("revision") != "r0" {
		t.Fatalf("initial revision: %s", p.raw)
	}

	alice := h.token("acme", "alice", "developer")
	stop := make(chan struct{})
	var calls, failures atomic.Int64
	var firstFailure atomic.Value
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("POST", h.base+"/v1/tools/read-file/calls", strings.NewReader(`{"arguments":{"path":"docs/guide.md"}}`))
				req.Header.Set("Authorization", "Bearer "+alice)
				req.Header.Set("Content-Type", "application/json")
				resp, err := h.client.Do(req)
				calls.Add(1)
				if err != nil {
					failures.Add(1)
					firstFailure.CompareAndSwap(nil, err.Error())
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !strings.Contains(string(body), `"outcome":"ok"`) {
					failures.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("%d %s", resp.StatusCode, body))
				}
			}
		})
	}

	served := map[string]bool{"r0": true}
	waitRevision := func(want string) {
		deadline := time.Now().Add(15 * time.Second)
		for {
			rev, err := h.g.engine.Current()
			if err == nil && rev.ID() == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("revision %s never served (serving %v)", want, rev.ID())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for i := 1; i <= 6; i++ {
		rev := fmt.Sprintf("r%d", i)
		if i == 3 {
			// A tampered and an unsigned bundle are refused; r2 keeps serving.
			tampered, err := bundletest.Tamper(bundleOf("bad-1", signer), "authz.rego", []byte("package toolgate.authz\n\ndecision := {\"allow\": true}\n"))
			must(t, err)
			for j, bad := range [][]byte{tampered, bundleOf("bad-2", nil)} {
				before := h.g.engine.Status().LastErrorAt
				srv.set(bad, fmt.Sprintf(`"bad-%d"`, j+1))
				deadline := time.Now().Add(15 * time.Second)
				for h.g.engine.Status().LastErrorAt.Equal(before) {
					if time.Now().After(deadline) {
						t.Fatal("a bad bundle was never rejected")
					}
					time.Sleep(10 * time.Millisecond)
				}
				if cur, _ := h.g.engine.Current(); cur.ID() != "r2" {
					t.Fatalf("serving %s after a bad bundle, want r2", cur.ID())
				}
			}
			if p := h.do("GET", "/v1/policy", admin, nil); p.str("revision") != "r2" || p.body["last_error"] == nil {
				t.Fatalf("policy status after a rejected bundle: %s", p.raw)
			}
		}
		srv.set(bundleOf(rev, signer), `"`+rev+`"`)
		waitRevision(rev)
		served[rev] = true
	}
	close(stop)
	wg.Wait()
	if failures.Load() > 0 {
		t.Fatalf("%d of %d requests failed during rotation, first: %v", failures.Load(), calls.Load(), firstFailure.Load())
	}
	seen := map[string]bool{}
	f := "phase=decision&limit=1000"
	for {
		r := h.do("GET", "/v1/audit/events?"+f, h.token("acme", "auditor-1", "auditor"), nil)
		for _, e := range r.body["events"].([]any) {
			rev := e.(map[string]any)["policy_revision"].(string)
			if !served[rev] {
				t.Fatalf("a decision used revision %q, which was never served", rev)
			}
			seen[rev] = true
		}
		next := r.str("next_cursor")
		if next == "" {
			break
		}
		f = "phase=decision&limit=1000&cursor=" + next
	}
	if len(seen) < 3 {
		t.Fatalf("decisions saw revisions %v; the rotation did not happen under load", seen)
	}
	t.Logf("%d calls over revisions %v", calls.Load(), seen)
}
