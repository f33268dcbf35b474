// Package otlptest is an OTLP/HTTP trace receiver on loopback for tests: it
// accepts POST /v1/traces (protobuf, optionally gzip), decodes each export
// with the OTLP protobuf definitions and keeps the spans.
package otlptest

import (
	"compress/gzip"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one received span with its ids in hex and its resource's
// service.name.
type Span struct {
	*tracepb.Span
	TraceID, SpanID, ParentID string
	Service                   string
}

// Attr returns the string value of the span's attribute key ("" when
// absent).
func (s Span) Attr(key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// Receiver collects the spans exported to it.
type Receiver struct {
	// URL is the collector's base URL (telemetry.otlp_endpoint).
	URL string

	mu       sync.Mutex
	spans    []Span
	requests int
	bad      []string
}

// New starts a receiver on loopback, closed when the test ends.
func New(t testing.TB) *Receiver {
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	r.requests++
	r.mu.Unlock()
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
		r.fail(req.Method + " " + req.URL.Path + " " + req.Header.Get("Content-Type"))
		http.Error(w, "unexpected request", http.StatusNotFound)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			r.fail("gzip: " + err.Error())
			http.Error(w, "bad gzip", http.StatusBadRequest)
			return
		}
		body = zr
	}
	raw, err := io.ReadAll(io.LimitReader(body, 64<<20))
	if err != nil {
		r.fail("read: " + err.Error())
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	var msg collectortrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(raw, &msg); err != nil {
		r.fail("protobuf: " + err.Error())
		http.Error(w, "bad protobuf", http.StatusBadRequest)
		return
	}
	var got []Span
	for _, rs := range msg.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				got = append(got, Span{Span: sp, TraceID: hex.EncodeToString(sp.GetTraceId()),
					SpanID: hex.EncodeToString(sp.GetSpanId()), ParentID: hex.EncodeToString(sp.GetParentSpanId()),
					Service: service})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	r.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

func (r *Receiver) fail(what string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bad = append(r.bad, what)
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Requests counts the requests received, good or not.
func (r *Receiver) Requests() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// Bad lists the requests that were not valid OTLP/HTTP trace exports.
func (r *Receiver) Bad() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bad...)
}

// Trace returns the received spans of one trace (hex id).
func (r *Receiver) Trace(traceID string) []Span {
	var out []Span
	for _, s := range r.Spans() {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	return out
}
