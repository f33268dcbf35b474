package telemetry_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/internal/telemetry/otlptest"
)

// hostile are traceparent values that must be ignored: the request then
// has no trace of the caller's.
var hostile = map[string][]string{
	"garbage":              {"not a traceparent"},
	"oversized":            {"00-" + strings.Repeat("a", 16<<10)},
	"all-zero trace id":    {"00-00000000000000000000000000000000-" + callerSpan + "-01"},
	"all-zero span id":     {"00-" + callerTrace + "-0000000000000000-01"},
	"version ff":           {"ff-" + callerTrace + "-" + callerSpan + "-01"},
	"upper-case hex":       {"00-" + strings.ToUpper(callerTrace) + "-" + callerSpan + "-01"},
	"version 00 with more": {callerHeader + "-extra"},
	"short trace id":       {"00-" + callerTrace[:30] + "-" + callerSpan + "-01"},
	"non-hex":              {"00-" + strings.Repeat("g", 32) + "-" + callerSpan + "-01"},
	"control characters":   {"00-\x00\x01-" + callerSpan + "-01"},
	"two headers":          {callerHeader, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
}

// seen runs one request through h and returns the span context its
// handler saw.
func seen(t *testing.T, mw func(http.Handler) http.Handler, header []string, tracestate string) trace.SpanContext {
	t.Helper()
	var sc trace.SpanContext
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc = trace.SpanContextFromContext(r.Context())
	}))
	req := httptest.NewRequest("POST", "/v1/tools/read-file/calls", nil)
	for _, v := range header {
		req.Header.Add("Traceparent", v)
	}
	if tracestate != "" {
		req.Header.Set("Tracestate", tracestate)
	}
	h.ServeHTTP(httptest.NewRecorder(), req)
	return sc
}

func TestMiddlewareWithExportOff(t *testing.T) {
	mw := telemetry.Middleware(nil)
	sc := seen(t, mw, []string{callerHeader}, "vendor=opaque")
	if sc.TraceID().String() != callerTrace || sc.SpanID().String() != callerSpan || !sc.IsRemote() || !sc.IsSampled() {
		t.Fatalf("caller's trace context not honoured: %+v", sc)
	}
	if sc.TraceState().Get("vendor") != "opaque" {
		t.Fatalf("tracestate lost: %q", sc.TraceState())
	}
	if sc := seen(t, mw, nil, ""); sc.IsValid() {
		t.Fatalf("a trace without a traceparent: %+v", sc)
	}
	for name, h := range hostile {
		t.Run(name, func(t *testing.T) {
			if sc := seen(t, mw, h, "vendor=x"); sc.IsValid() {
				t.Fatalf("accepted: %+v", sc)
			}
		})
	}
	// A malformed tracestate does not cost the traceparent.
	sc = seen(t, mw, []string{callerHeader}, strings.Repeat("x=", 5000))
	if sc.TraceID().String() != callerTrace || sc.TraceState().Len() != 0 {
		t.Fatalf("with a malformed tracestate: %+v", sc)
	}
}

func TestMiddlewareWithExportOn(t *testing.T) {
	rx := otlptest.New(t)
	tr := open(t, telemetry.Config{OTLPEndpoint: rx.URL}, nil)
	mw := telemetry.Middleware(tr.Provider())
	sc := seen(t, mw, []string{callerHeader}, "")
	if sc.TraceID().String() != callerTrace || sc.IsRemote() || sc.SpanID().String() == callerSpan {
		t.Fatalf("server span not a child in the caller's trace: %+v", sc)
	}
	for name, h := range hostile {
		t.Run(name, func(t *testing.T) {
			sc := seen(t, mw, h, "")
			if !sc.IsValid() || sc.IsRemote() {
				t.Fatalf("no trace of the gateway's own: %+v", sc)
			}
			for _, v := range h {
				if strings.Contains(v, sc.TraceID().String()) {
					t.Fatalf("trace id %s taken from the hostile header", sc.TraceID())
				}
			}
		})
	}
	if err := tr.ForceFlush(t.Context()); err != nil {
		t.Fatal(err)
	}
	var server []otlptest.Span
	for _, s := range rx.Trace(callerTrace) {
		server = append(server, s)
	}
	if len(server) != 1 || server[0].ParentID != callerSpan || server[0].GetKind().String() != "SPAN_KIND_SERVER" {
		t.Fatalf("caller's trace: %+v", server)
	}
	// Probes and scrapes get no span.
	before := len(rx.Spans())
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
	}
	tr.ForceFlush(t.Context())
	if after := len(rx.Spans()); after != before {
		t.Fatalf("probes made %d spans", after-before)
	}
}

// roundTrip sends a request through telemetry.Transport(tp) from ctx and
// returns the traceparent the server received.
func roundTrip(t *testing.T, tp trace.TracerProvider, sc trace.SpanContext) (string, *http.Request) {
	t.Helper()
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Traceparent")
	}))
	defer srv.Close()
	ctx := t.Context()
	if sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL, strings.NewReader("{}"))
	c := &http.Client{Transport: telemetry.Transport(tp, http.DefaultTransport), Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return <-got, req
}

func callerContext(t *testing.T) trace.SpanContext {
	t.Helper()
	tid, _ := trace.TraceIDFromHex(callerTrace)
	sid, _ := trace.SpanIDFromHex(callerSpan)
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
}

func TestTransportWithExportOff(t *testing.T) {
	got, req := roundTrip(t, nil, callerContext(t))
	if got != callerHeader {
		t.Fatalf("upstream received traceparent %q, want %q", got, callerHeader)
	}
	if req.Header.Get("Traceparent") != "" {
		t.Fatal("the transport modified the caller's request")
	}
	if got, _ := roundTrip(t, nil, trace.SpanContext{}); got != "" {
		t.Fatalf("a request without a trace carries traceparent %q", got)
	}
}

func TestTransportWithExportOn(t *testing.T) {
	rx := otlptest.New(t)
	tr := open(t, telemetry.Config{OTLPEndpoint: rx.URL}, nil)
	got, _ := roundTrip(t, tr.Provider(), callerContext(t))
	parts := strings.Split(got, "-")
	if len(parts) != 4 || parts[1] != callerTrace || parts[2] == callerSpan {
		t.Fatalf("upstream received traceparent %q: want the caller's trace, the upstream span's id", got)
	}
	tr.ForceFlush(t.Context())
	spans := rx.Trace(callerTrace)
	if len(spans) != 1 || spans[0].GetName() != "upstream" || spans[0].SpanID != parts[2] || spans[0].ParentID != callerSpan {
		t.Fatalf("upstream span: %+v", spans)
	}
}

func TestStage(t *testing.T) {
	rx := otlptest.New(t)
	tr := open(t, telemetry.Config{OTLPEndpoint: rx.URL}, nil)
	tracer := telemetry.Tracer(tr.Provider(), "test")
	_, parent := tracer.Start(t.Context(), "request")
	start := time.Unix(1700000000, 0)
	telemetry.Stage(tracer, parent, "decide", start, start.Add(1500*time.Microsecond))
	parent.End()
	// Not recording: nothing, and no panic with a nil tracer.
	telemetry.Stage(nil, parent, "ignored", start, start)
	telemetry.Stage(tracer, trace.SpanFromContext(t.Context()), "ignored", start, start)
	tr.ForceFlush(t.Context())
	spans := rx.Trace(parent.SpanContext().TraceID().String())
	var stage *otlptest.Span
	for i := range spans {
		if spans[i].GetName() == "decide" {
			stage = &spans[i]
		}
		if spans[i].GetName() == "ignored" {
			t.Fatal("a stage of a span that was not recording was exported")
		}
	}
	if stage == nil || stage.ParentID != parent.SpanContext().SpanID().String() ||
		stage.GetStartTimeUnixNano() != uint64(start.UnixNano()) || stage.GetEndTimeUnixNano()-stage.GetStartTimeUnixNano() != 1500000 {
		t.Fatalf("stage span %+v", stage)
	}
}

// The server span's request attributes come from an unauthenticated
// caller: they are cut, so a queue of spans cannot hold megabytes each.
func TestRequestAttributesAreBounded(t *testing.T) {
	rx := otlptest.New(t)
	tr := open(t, telemetry.Config{OTLPEndpoint: rx.URL}, nil)
	h := telemetry.Middleware(tr.Provider())(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	req := httptest.NewRequest("GET", "/v1/tools/"+strings.Repeat("a", 64<<10)+"/calls?x="+strings.Repeat("b", 64<<10), nil)
	req.Header.Set("User-Agent", strings.Repeat("c", 64<<10))
	h.ServeHTTP(httptest.NewRecorder(), req)
	if err := tr.ForceFlush(t.Context()); err != nil {
		t.Fatal(err)
	}
	spans := rx.Spans()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	long := 0
	for _, kv := range spans[0].GetAttributes() {
		v := kv.GetValue().GetStringValue()
		if len(v) > telemetry.MaxAttributeLength {
			t.Errorf("attribute %s has %d bytes", kv.GetKey(), len(v))
		}
		if len(v) == telemetry.MaxAttributeLength {
			long++
		}
	}
	if long == 0 {
		t.Fatal("no attribute was cut: the test did not reach the limit")
	}
}
