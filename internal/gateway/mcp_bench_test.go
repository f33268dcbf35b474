package gateway

// go test -run '^$' -bench BenchmarkMCPUpstreamOverhead -benchtime 2000x ./internal/gateway/

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

// BenchmarkMCPUpstreamOverhead measures what the gateway adds to a call of
// an MCP upstream tool: the same SDK-built MCP server (streamable HTTP on
// loopback) called directly by the SDK's client over one session, and
// through the gateway's REST API (auth, availability, schema validation,
// prepare, decide, durable audit of both events, assertion signing, the
// tools/call round trip on the gateway's session, result shaping). One
// caller at a time; p50 and p99 per call are reported.
func BenchmarkMCPUpstreamOverhead(b *testing.B) {
	m := newTestMCPServer()
	url := m.serve(b)
	h := start(b, withMCP(url, false, "      pin: false\n"))
	tok := h.token("acme", "alice", "developer")
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}

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
	b.Run("direct", func(b *testing.B) {
		// The test server wants an assertion header, as the gateway sends.
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true,
			HTTPClient: &http.Client{Transport: headerTransport{"Toolgate-Assertion": "x"}}}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		run(b, func() bool {
			res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "search_notes", Arguments: map[string]any{"query": "plan", "limit": 5}})
			return err == nil && !res.IsError
		})
	})
	b.Run("gateway", func(b *testing.B) {
		body := []byte(`{"arguments":{"query":"plan"}}`)
		run(b, func() bool {
			req, _ := http.NewRequest("POST", h.base+"/v1/tools/notes-search-notes/calls", bytes.NewReader(body))
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
}

type headerTransport map[string]string

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}
