package upstream

// go test -run '^$' -bench . -benchmem ./internal/tools/upstream/

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/assertion"
	"github.com/toolgate/toolgate/internal/tools"
)

// BenchmarkToolCall is Prepare + Run of an upstream tool with a real
// Ed25519 signer against a loopback service: canonical body, signing, the
// pooled round trip, result shaping. BenchmarkDirectPost is the same POST
// with a pooled client and no assertion.
func BenchmarkToolCall(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"service":"checkout","minutes":30}`)
	}))
	defer srv.Close()
	key := filepath.Join(b.TempDir(), "k.pem")
	if _, err := assertion.EnsureKey(key); err != nil {
		b.Fatal(err)
	}
	signer, err := assertion.New(assertion.Options{Issuer: "toolgate", TTL: time.Minute, SigningKeyFile: key})
	if err != nil {
		b.Fatal(err)
	}
	tool, err := New(Declaration{Name: "maintenance-window", InputSchema: schema, Action: "maintenance.read",
		Resources: []map[string]string{{"type": "service", "id": "/service_id"}},
		URL:       srv.URL, Method: "POST", Timeout: 5 * time.Second, MaxConcurrent: 4, MaxResponseBytes: 1 << 20}, signer)
	if err != nil {
		b.Fatal(err)
	}
	defer tool.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		plan, err := tool.Prepare(ctx, env, map[string]any{"service_id": "checkout"})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tool.Run(ctx, env, plan.Artifact, tools.Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDirectPost(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"service":"checkout","minutes":30}`)
	}))
	defer srv.Close()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	body := []byte(`{"days":7,"service_id":"checkout"}`)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := hc.Post(srv.URL, "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
}
