package gateway

// go test -run '^$' -bench BenchmarkUpstreamOverhead -benchtime 3000x ./internal/gateway/

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"testing"
	"time"

	"github.com/toolgate/toolgate/sdk/upstream"
	"github.com/toolgate/toolgate/sdk/upstream/upstreamtest"
)

// BenchmarkUpstreamOverhead measures what the gateway adds to an upstream
// call: the same SDK-built service (assertion verification, strict decode,
// a JSON answer) called directly with an assertion, and through the
// gateway over loopback HTTP (auth, availability, prepare, decide, durable
// audit of both events, assertion signing, the upstream round trip,
// result shaping). One caller at a time; p50 and p99 per call are reported.
func BenchmarkUpstreamOverhead(b *testing.B) {
	type args struct {
		ServiceID string `json:"service_id"`
		Days      int    `json:"days"`
	}
	answer := func(_ context.Context, id *upstream.Identity, a args) (any, error) {
		return map[string]any{"service": a.ServiceID, "start": "2025-06-01T02:00:00Z", "minutes": 30}, nil
	}
	iss := upstreamtest.NewIssuer()
	direct, err := upstream.NewVerifier(upstream.Options{JWKS: iss.JWKS(), Audience: "maintenance-window"})
	if err != nil {
		b.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /direct", upstream.Handle(direct, answer))
	var viaGateway http.Handler
	mux.HandleFunc("POST /maintenance-window", func(w http.ResponseWriter, r *http.Request) { viaGateway.ServeHTTP(w, r) })
	svc := httptest.NewServer(mux)
	defer svc.Close()

	h := start(b, withUpstream(svc.URL+"/maintenance-window"))
	gv, err := upstream.NewVerifier(upstream.Options{JWKSURL: h.base + "/.well-known/jwks.json", Audience: "maintenance-window"})
	if err != nil {
		b.Fatal(err)
	}
	viaGateway = upstream.Handle(gv, answer)
	tok := h.token("acme", "bob", "oncall")
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}

	run := func(b *testing.B, do func() int) {
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			t0 := time.Now()
			if st := do(); st != 200 {
				b.Fatalf("status %d", st)
			}
			lat = append(lat, time.Since(t0))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
	send := func(req *http.Request) int {
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	b.Run("direct", func(b *testing.B) {
		// A fresh assertion per call, as the gateway sends one per call.
		id := upstream.Identity{Audience: "maintenance-window", Subject: "bob", Tenant: "acme", Roles: []string{"oncall"}}
		run(b, func() int {
			req := iss.Request(svc.URL+"/direct", id, args{ServiceID: "checkout", Days: 7})
			return send(req)
		})
	})
	b.Run("gateway", func(b *testing.B) {
		body := []byte(`{"arguments":{"service_id":"checkout"}}`)
		run(b, func() int {
			req, _ := http.NewRequest("POST", h.base+"/v1/tools/maintenance-window/calls", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			return send(req)
		})
	})
}
