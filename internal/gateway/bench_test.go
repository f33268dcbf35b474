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

func benchHandlerWith(b *testing.B, opt func(*setup), path, body string, parallel bool) {
	h := start(b, opt)
	tok := h.token("acme", "alice", "developer")
	handler := h.g.Handler()
	do := func() {
		req := httptest.NewRequest("POST", path, bytes.NewReader([]byte(body)))
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
