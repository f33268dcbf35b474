package fetch

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// A fetch goes to a host the model chose: the caller's trace context (a
// traceparent honoured by the gateway) is not that host's to see, unlike
// an upstream tool's.
func TestFetchNeverSendsTraceContext(t *testing.T) {
	got := make(chan http.Header, 1)
	_, port := server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	}))
	f := New(Options{Resolver: newStub("svc.test", "127.0.0.1")})
	plan := mustPrepare(t, f, map[string]any{"url": "http://svc.test:" + port + "/"})
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, _ := trace.ParseTraceState("vendor=opaque")
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts,
	}))
	if _, err := f.Run(ctx, env(), plan.Artifact, f.Spec().Limits); err != nil {
		t.Fatal(err)
	}
	h := <-got
	for _, name := range []string{"Traceparent", "Tracestate", "Baggage"} {
		if v := h.Values(name); len(v) > 0 {
			t.Errorf("the fetched host received %s: %q", name, v)
		}
	}
}
