package gateway

// go test -run '^$' -bench . -benchmem ./internal/gateway/

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
)

// benchHandler measures the whole request path in-process (no network):
// auth, envelope, availability, prepare, decide, durable audit append(s),
// invoke, response encoding.
//
// Each benchmark runs with the decision cache on (the default: the same
// call repeated is answered from the cache) and off (every call evaluates
// the policy, as distinct calls do).
func benchHandler(b *testing.B, path, body string, parallel bool) {
	for _, bc := range []struct {
		name string
		size int
	}{{"cache", 4096}, {"nocache", 0}} {
		b.Run(bc.name, func(b *testing.B) {
			size := bc.size
			benchHandlerWith(b, func(s *setup) { s.cacheSize = &size }, path, body, parallel)
		})
	}
}

// benchHandlerWith runs one benchmark; header adds name, value pairs to
// every request.
func benchHandlerWith(b *testing.B, opt func(*setup), path, body string, parallel bool, header ...string) {
	h := start(b, opt)
	tok := h.token("acme", "alice", "developer")
	handler := h.g.Handler()
	do := func() {
		req := httptest.NewRequest("POST", path, bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	if parallel {
		b.SetParallelism(8) // 16 concurrent callers on 2 cores: group commit shares fsyncs
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				do()
			}
		})
		return
	}
	for b.Loop() {
		do()
	}
}

const readBody = `{"arguments":{"path":"docs/guide.md"},"session_id":"bench"}`

func BenchmarkHandlerCallReadFile(b *testing.B) {
	benchHandler(b, "/v1/tools/read-file/calls", readBody, false)
}

func BenchmarkHandlerCallReadFileParallel(b *testing.B) {
	benchHandler(b, "/v1/tools/read-file/calls", readBody, true)
}

func BenchmarkHandlerDecisionReadFile(b *testing.B) {
	benchHandler(b, "/v1/tools/read-file/decisions", readBody, false)
}

func BenchmarkHandlerDecisionReadFileParallel(b *testing.B) {
	benchHandler(b, "/v1/tools/read-file/decisions", readBody, true)
}

func BenchmarkHandlerUnavailable(b *testing.B) {
	benchHandler(b, "/v1/tools/no-such-tool/calls", readBody, false)
}

// Batch throughput: 16 reads as one POST /v1/batches against the same 16
// reads as 16 single calls, one after another (a model turn's parallel
// calls sent the way a platform without batches would). Both report
// calls/s.
//
// go test -run '^$' -bench 'Sixteen' -benchmem ./internal/gateway/

const sixteen = 16

func benchSixteen(b *testing.B, batch bool) {
	h := start(b)
	tok := h.token("acme", "alice", "developer")
	handler := h.g.Handler()
	var calls bytes.Buffer
	calls.WriteString(`{"session_id":"bench","calls":[`)
	for i := range sixteen {
		if i > 0 {
			calls.WriteByte(',')
		}
		calls.WriteString(`{"tool":"read-file","arguments":{"path":"docs/guide.md"}}`)
	}
	calls.WriteString(`]}`)
	post := func(path string, body []byte) {
		req := httptest.NewRequest("POST", path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if batch {
			post("/v1/batches", calls.Bytes())
			continue
		}
		for range sixteen {
			post("/v1/tools/read-file/calls", []byte(readBody))
		}
	}
	b.ReportMetric(float64(sixteen*b.N)/b.Elapsed().Seconds(), "calls/s")
}

func BenchmarkSixteenReadsAsOneBatch(b *testing.B) { benchSixteen(b, true) }

func BenchmarkSixteenReadsAsSingleCalls(b *testing.B) { benchSixteen(b, false) }
