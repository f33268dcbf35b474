package gateway

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
)

// send sends req as is (no headers added) and checks the answer against
// api/openapi.yaml, as do does.
func (h *harness) send(req *http.Request) response {
	h.t.Helper()
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	r := response{status: resp.StatusCode, header: resp.Header, raw: raw}
	if req.Method != "HEAD" && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			h.t.Errorf("%s %s: response is not a JSON object: %v: %s", req.Method, req.URL.Path, err, raw)
		}
	}
	h.mu.Lock()
	err = h.spec.Check(req.Method, req.URL.Path, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	h.mu.Unlock()
	if err != nil {
		h.t.Errorf("OpenAPI conformance: %v", err)
	}
	return r
}

// onlyReader hides a reader's length, so that net/http sends it chunked.
type onlyReader struct{ io.Reader }

func (h *harness) request(method, path, token string, body io.Reader, contentType string) *http.Request {
	h.t.Helper()
	req, err := http.NewRequest(method, h.base+path, body)
	if err != nil {
		h.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return req
}

// A body over limits.max_body_bytes is 413 however it is framed: with a
// Content-Length, and chunked with no length announced. Nothing runs and
// nothing is audited; a chunked body under the cap is served.
func TestOversizedChunkedBodyIs413(t *testing.T) {
	t.Parallel()
	h := start(t)
	dev := h.token("acme", "alice", "developer")
	before, events := h.snapshot(), len(h.allEvents("acme", ""))
	big := `{"arguments":{"path":"notes/big.txt","content":"` + strings.Repeat("x", 70000) + `"}}`
	for name, body := range map[string]io.Reader{
		"chunked":        onlyReader{strings.NewReader(big)},
		"content-length": strings.NewReader(big),
		// The cap counts bytes, not JSON: one byte over is over.
		"chunked, one byte over": onlyReader{strings.NewReader(`{"arguments":{"path":"notes/big.txt","content":"` + strings.Repeat("x", 65536-len(`{"arguments":{"path":"notes/big.txt","content":""}}`)+1) + `"}}`)},
	} {
		req := h.request("POST", "/v1/tools/write-file/calls", dev, body, "application/json")
		if name != "content-length" && req.ContentLength != 0 { // 0 with a body: unknown, sent chunked
			t.Fatalf("%s: the request would not be chunked", name)
		}
		if r := h.send(req); r.status != 413 || r.errCode() != "too_large" {
			t.Fatalf("%s: %d %s, want 413 too_large", name, r.status, r.raw)
		}
	}
	h.assertUnchanged(before)
	if n := len(h.allEvents("acme", "")); n != events {
		t.Fatalf("oversized bodies left %d audit events", n-events)
	}
	exact := `{"arguments":{"path":"notes/fits.txt","content":"` + strings.Repeat("y", 65536-len(`{"arguments":{"path":"notes/fits.txt","content":""}}`)) + `"}}`
	if len(exact) != 65536 {
		t.Fatalf("test body is %d bytes", len(exact))
	}
	r := h.send(h.request("POST", "/v1/tools/write-file/calls", dev, onlyReader{strings.NewReader(exact)}, "application/json"))
	if r.status != 200 || r.str("outcome") != "ok" {
		t.Fatalf("chunked body of exactly the cap: %d %s", r.status, r.raw)
	}
}

// A body must be declared JSON: anything else is 415 before it is read,
// and nothing runs. Parameters are fine; a charset must be UTF-8.
func TestBodyWithoutJSONContentTypeIs415(t *testing.T) {
	t.Parallel()
	h := start(t)
	dev := h.token("acme", "alice", "developer")
	before, events := h.snapshot(), len(h.allEvents("acme", ""))
	body := `{"arguments":{"path":"notes/ct.txt","content":"x"}}`
	for _, ct := range []string{
		"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
		"application/jsonx", "application/json-patch+json", "application/problem+json", "text/json",
		"application/json; charset=latin1", "application/json; charset=utf-16", "application/json;;", "garbage",
	} {
		r := h.send(h.request("POST", "/v1/tools/write-file/calls", dev, strings.NewReader(body), ct))
		if r.status != 415 || r.errCode() != "unsupported_media_type" {
			t.Fatalf("Content-Type %q: %d %s, want 415 unsupported_media_type", ct, r.status, r.raw)
		}
	}
	// Every route with a body checks it, the management ones included.
	admin := h.token("acme", "root", "auditor", "approver", "policy-admin")
	for _, path := range []string{"/v1/tools/read-file/decisions", "/v1/batches", "/v1/batches/decisions",
		"/v1/approvals/nope/approve", "/v1/approvals/nope/deny", "/v1/questions/nope/answer",
		"/v1/policy/eval", "/v1/policy/replay", "/v1/audit/verify"} {
		if r := h.send(h.request("POST", path, admin, strings.NewReader(`{}`), "text/plain")); r.status != 415 {
			t.Fatalf("%s with text/plain: %d %s", path, r.status, r.raw)
		}
	}
	h.assertUnchanged(before)
	if n := len(h.allEvents("acme", "")); n != events {
		t.Fatalf("refused bodies left %d audit events", n-events)
	}
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON; Charset=UTF-8"} {
		r := h.send(h.request("POST", "/v1/tools/write-file/calls", dev, strings.NewReader(body), ct))
		if r.status != 200 || r.str("outcome") != "ok" {
			t.Fatalf("Content-Type %q: %d %s", ct, r.status, r.raw)
		}
	}
	if b, err := os.ReadFile(filepath.Join(h.dir, "ws", "acme", "notes", "ct.txt")); err != nil || string(b) != "x" {
		t.Fatalf("the accepted call did not run: %q %v", b, err)
	}
	// approve and deny take no body: an empty one needs no Content-Type.
	r := h.send(h.request("POST", "/v1/approvals/no-such-approval/approve", admin, nil, ""))
	if r.status != 404 {
		t.Fatalf("approve with no body: %d %s", r.status, r.raw)
	}
}

// A path no route serves is 404, a served path with another method 405
// with Allow; under /v1/ the credential is checked first.
func TestUnroutedRequestsAre404And405(t *testing.T) {
	t.Parallel()
	h := start(t)
	dev := h.token("acme", "alice", "developer")
	for _, c := range []struct {
		method, path, token string
		status              int
		allow               string
	}{
		{"GET", "/v1/tools/read-file/nope", dev, 404, ""},
		{"POST", "/v1/tools/read-file/calls/extra", dev, 404, ""},
		{"GET", "/v2/tools", "", 404, ""},
		{"GET", "/v1/tools/read-file/nope", "", 401, ""},
		{"GET", "/v1/tools/read-file/calls", dev, 405, "POST"},
		{"DELETE", "/v1/tools", dev, 405, "GET"},
		{"PUT", "/v1/audit/verify", dev, 405, "GET, POST"},
		{"POST", "/healthz", "", 405, "GET"},
		{"HEAD", "/readyz", "", 405, "GET"},
		{"BREW", "/healthz", "", 405, "GET"},
	} {
		r := h.send(h.request(c.method, c.path, c.token, nil, ""))
		if r.status != c.status {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, r.status, r.raw, c.status)
			continue
		}
		if got := r.header.Get("Allow"); got != c.allow {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, got, c.allow)
		}
		if c.method != "HEAD" && !bytes.Contains(r.raw, []byte(`"error"`)) {
			t.Errorf("%s %s: no error body: %s", c.method, c.path, r.raw)
		}
	}
}
