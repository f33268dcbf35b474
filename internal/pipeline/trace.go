package pipeline

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/internal/invoke"
	"github.com/toolgate/toolgate/internal/telemetry"
)

// Tracing. A single call's stages are child spans of its request's span;
// a batch gives each call a span of its own ("call") under the batch
// request's span, and the call's stages are children of that. Stage spans
// are recorded at the boundaries of the stage timings (stage, append), so
// that a span's duration is the stage's durations_us; invoke is a span
// that is open while the tool runs, so that an upstream tool's request
// ("upstream") is its child. When the request's span is not recording
// (export off, or not sampled) none of this allocates anything.
//
// Spans carry ids, the tenant, the tool (configured names only) and the
// outcome: never arguments, content, or the principal.

// noSpan is the span of a context without one: it records nothing.
var noSpan = trace.SpanFromContext(context.Background())

// startSpan starts a child span of c's span that is open while the stage
// runs, and returns the context that carries it. A call that is not
// recorded keeps ctx (and with it any incoming trace context).
func (p *Pipeline) startSpan(ctx context.Context, c *call, name string) (context.Context, trace.Span) {
	if p.tracer == nil || c.span == nil || !c.span.IsRecording() {
		return ctx, noSpan
	}
	return p.tracer.Start(trace.ContextWithSpan(ctx, c.span), name)
}

// endInvoke ends the invoke span with the call's outcome.
func endInvoke(span trace.Span, out invoke.Outcome) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String("toolgate.outcome", string(out.Outcome)))
	if out.IsError {
		span.SetStatus(codes.Error, string(out.Outcome))
	}
	span.End()
}

// auditSpan records an audit append that started at t0 (the decision
// event's, or the result event's).
func (p *Pipeline) auditSpan(c *call, t0 time.Time) {
	if c.span != nil {
		telemetry.Stage(p.tracer, c.span, "audit", t0, time.Now())
	}
}

// batchCallSpan starts the span of one call of a batch, a child of the
// batch request's span (the context's); without a recording span the
// call shares the request's.
func (p *Pipeline) batchCallSpan(ctx context.Context) (trace.Span, bool) {
	parent := trace.SpanFromContext(ctx)
	if p.tracer == nil || !parent.IsRecording() {
		return parent, false
	}
	_, span := p.tracer.Start(ctx, "call")
	return span, true
}

// noteSpan puts the call's ids and outcome on its span; a call that
// failed closed (err) marks it failed with the cause.
func (c *call) noteSpan(resp Response, err error) {
	if c.span == nil || !c.span.IsRecording() {
		return
	}
	c.span.SetAttributes(
		attribute.String("toolgate.tenant", c.req.Identity.Tenant),
		attribute.String("toolgate.tool", c.toolLabel()),
		attribute.String("toolgate.call_id", c.callID),
		attribute.String("toolgate.decision_id", c.decisionID),
	)
	if err != nil {
		c.span.SetStatus(codes.Error, "failed closed: "+causeOf(err))
		return
	}
	c.span.SetAttributes(attribute.String("toolgate.outcome", string(resp.Outcome)))
}
