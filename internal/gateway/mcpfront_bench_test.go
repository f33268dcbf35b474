package gateway

// go test -run '^$' -bench BenchmarkMCPFrontDoorOverhead -benchtime 2000x ./internal/gateway/

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sort"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkMCPFrontDoorOverhead measures what the MCP front door adds to a
// call over REST: the same read-file call by the same caller, one at a
// time, through POST /v1/tools/{name}/calls and through tools/call at
// /mcp with the Go SDK's client, on a 2025-11-25 session and on the
// sessionless 2026-07-28 revision. Both run the same service path
// (prepare, decide, durable audit of both events, invoke); the difference
// is the protocol: JSON-RPC framing, the SDK's server and, for sessions,
// the session's stream. p50 and p99 per call are reported.
func BenchmarkMCPFrontDoorOverhead(b *testing.B) {
	h := start(b, withAudience)
	tok := h.audToken(mcpAudience, "acme", "dana", "developer")
	run := func(b *testing.B, do func() bool) {
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			t0 := time.Now()
			if !do() {
				b.Fatal("call failed")
			}
			lat = append(lat, time.Since(t0))
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
	b.Run("rest", func(b *testing.B) {
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
		body := []byte(`{"arguments":{"path":"docs/guide.md"}}`)
		run(b, func() bool {
			req, _ := http.NewRequest("POST", h.base+"/v1/tools/read-file/calls", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				return false
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode == 200 && bytes.Contains(raw, []byte(`"outcome":"ok"`))
		})
	})
	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		b.Run("mcp-"+rev, func(b *testing.B) {
			c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
			s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: h.base + "/mcp", DisableStandaloneSSE: true,
				HTTPClient: &http.Client{Transport: bearer{token: tok}}}, &mcp.ClientSessionOptions{ProtocolVersion: rev})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			run(b, func() bool {
				res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "read-file", Arguments: map[string]any{"path": "docs/guide.md"}})
				return err == nil && !res.IsError
			})
		})
	}
}
