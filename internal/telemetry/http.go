package telemetry

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Unprobed are the paths that get no server span: probes and scrapes,
// which would otherwise fill a trace store with noise every few seconds.
var Unprobed = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// Middleware starts a server span for each request, a child of the
// caller's traceparent when it sent a valid one, and puts it in the
// request's context. The span is named by the method until the route is
// known (SetRoute). A malformed traceparent or tracestate is ignored: the
// request starts a trace of its own.
//
// With tp nil (export off) it records nothing and only extracts the
// caller's trace context, so that the trace id still reaches the audit log
// and upstream tools.
//
// Several traceparent headers are ambiguous (W3C trace context allows
// one): they are dropped, with tracestate, as if none had been sent.
func Middleware(tp trace.TracerProvider) func(http.Handler) http.Handler {
	if tp == nil {
		return func(next http.Handler) http.Handler { return unambiguous(extractOnly(next)) }
	}
	traced := otelhttp.NewMiddleware("toolgate",
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(Propagator),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()), // metrics are Prometheus's
		otelhttp.WithFilter(func(r *http.Request) bool { return !Unprobed[r.URL.Path] }),
	)
	return func(next http.Handler) http.Handler { return unambiguous(traced(next)) }
}

// unambiguous drops the trace context of a request that sent more than
// one traceparent header.
func unambiguous(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.Header["Traceparent"]) > 1 {
			r.Header.Del("Traceparent")
			r.Header.Del("Tracestate")
		}
		next.ServeHTTP(w, r)
	})
}

// extractOnly puts the caller's trace context, when it sent a valid one,
// into the request's context as a remote, non-recording span.
func extractOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := r.Header["Traceparent"]; !ok {
			next.ServeHTTP(w, r)
			return
		}
		ctx := Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		if !trace.SpanContextFromContext(ctx).IsValid() {
			next.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

var httpRoute = attribute.Key("http.route")

// SetRoute names r's server span after its route pattern once the router
// has matched it ("POST /v1/tools/{name}/calls": low cardinality, no
// tool names or ids), as OpenTelemetry's HTTP conventions ask.
func SetRoute(r *http.Request, route string) {
	span := trace.SpanFromContext(r.Context())
	if !span.IsRecording() || route == "" {
		return
	}
	span.SetName(r.Method + " " + route)
	span.SetAttributes(httpRoute.String(route))
}

// Transport wraps base for calls to upstream tools: each request carries
// the trace context of its context (traceparent, tracestate), and, with tp
// set, is a client span named "upstream". With tp nil it only injects the
// context, so that an incoming traceparent reaches the upstream service.
func Transport(tp trace.TracerProvider, base http.RoundTripper) http.RoundTripper {
	if tp == nil {
		return injectOnly{base}
	}
	return otelhttp.NewTransport(base,
		otelhttp.WithTracerProvider(tp),
		otelhttp.WithPropagators(Propagator),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelhttp.WithSpanNameFormatter(func(string, *http.Request) string { return "upstream" }),
	)
}

// injectOnly adds the context's trace context to each request.
type injectOnly struct{ base http.RoundTripper }

func (t injectOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(r.Context()).IsValid() {
		return t.base.RoundTrip(r)
	}
	// A RoundTripper must not modify the request it was given.
	r = r.Clone(r.Context())
	Propagator.Inject(r.Context(), propagation.HeaderCarrier(r.Header))
	return t.base.RoundTrip(r)
}

// Stage records a stage that ran from start to end as a child span of
// parent, after the fact: the same boundaries as the stage's duration
// metric and audit durations_us, not a second set of timers. It does
// nothing when parent is not recording (export off, or a trace not
// sampled), so stages cost nothing then.
func Stage(tracer trace.Tracer, parent trace.Span, name string, start, end time.Time, attrs ...attribute.KeyValue) {
	if tracer == nil || parent == nil || !parent.IsRecording() {
		return
	}
	_, span := tracer.Start(trace.ContextWithSpan(context.Background(), parent), name,
		trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	span.End(trace.WithTimestamp(end))
}

// Tracer is tp's tracer for an instrumentation scope, nil when tp is nil.
func Tracer(tp trace.TracerProvider, scope string) trace.Tracer {
	if tp == nil {
		return nil
	}
	return tp.Tracer(scope)
}
