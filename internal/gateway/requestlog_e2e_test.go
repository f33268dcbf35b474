package gateway

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Every response carries a request id (the caller's when it is a safe
// token), and the debug request log line ties it to the call and decision.
func TestRequestIDsAndRequestLog(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	h := start(t, func(s *setup) { s.logTo = &logs })
	dev := h.token("acme", "alice", "developer")

	r := h.do("POST", "/v1/tools/read-file/calls", dev, []byte(`{"arguments":{"path":"docs/guide.md"}}`),
		"Content-Type", "application/json", "X-Request-Id", "req-42.a:b_c")
	if r.status != 200 || r.header.Get("X-Request-Id") != "req-42.a:b_c" {
		t.Fatalf("%d, X-Request-Id %q", r.status, r.header.Get("X-Request-Id"))
	}
	callID, decisionID := r.str("call_id"), r.str("decision_id")
	line := ""
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "msg=request") && strings.Contains(l, "request_id=req-42.a:b_c") {
			line = l
		}
	}
	if line == "" || !strings.Contains(line, "call_id="+callID) || !strings.Contains(line, "decision_id="+decisionID) ||
		!strings.Contains(line, "status=200") || !strings.Contains(line, "route=/v1/tools/{name}/calls") {
		t.Fatalf("no request log line tying the request to its call; log:\n%s", logs.String())
	}

	// An unsafe or oversized id is replaced, never echoed or logged.
	for _, bad := range []string{"a b", "x\"y", strings.Repeat("a", 129), "é"} {
		r := h.do("GET", "/healthz", "", nil, "X-Request-Id", bad)
		got := r.header.Get("X-Request-Id")
		if !regexp.MustCompile(`^[0-9a-f]{24}$`).MatchString(got) {
			t.Fatalf("X-Request-Id %q for %q, want a fresh id", got, bad)
		}
	}
	if strings.Contains(logs.String(), `x"y`) {
		t.Fatal("an unsafe request id reached the log")
	}
}
