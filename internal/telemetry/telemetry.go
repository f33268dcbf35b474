// Package telemetry is the gateway's OpenTelemetry tracing: a tracer
// provider that exports spans over OTLP/HTTP when a collector is
// configured, and the HTTP middleware and client transport that carry W3C
// trace context (traceparent, tracestate) in and out.
//
// With no collector configured nothing is exported and no span is
// recorded, yet an incoming traceparent still travels with the request:
// its trace id is recorded in the audit events and forwarded to upstream
// tools. The cost of that is one header lookup per request.
//
// Only W3C trace context is propagated (not baggage, not B3), whatever
// OTEL_PROPAGATORS says; sampling comes from the configuration, not
// OTEL_TRACES_SAMPLER. The exporter reads the other standard
// OTEL_EXPORTER_OTLP_* variables (headers, timeout, compression,
// certificates) itself.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// DefaultServiceName is service.name when neither telemetry.service_name
// nor OTEL_SERVICE_NAME sets one.
const DefaultServiceName = "toolgate"

// Environment variables that name a collector when telemetry.otlp_endpoint
// does not: either turns export on.
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
)

// MaxAttributeLength bounds every span attribute value (bytes of a
// string); OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT may lower it.
const MaxAttributeLength = 1024

// TracesPath is appended to a collector's base URL, as for
// OTEL_EXPORTER_OTLP_ENDPOINT.
const TracesPath = "/v1/traces"

// Propagator is the one propagation format: W3C trace context.
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// DefaultSampleRatio is telemetry.sample_ratio's default: every trace
// started here is recorded (when an exporter is configured at all).
const DefaultSampleRatio = 1.0

// Config is the telemetry section of gateway.yaml (docs/operations.md
// "Tracing"). Nothing is exported unless an OTLP endpoint is set, here or
// in the standard environment variables.
type Config struct {
	// OTLPEndpoint is the base URL of an OTLP/HTTP collector, as
	// OTEL_EXPORTER_OTLP_ENDPOINT (spans are posted to <url>/v1/traces),
	// e.g. "http://otel-collector:4318". It wins over that variable; the
	// other OTEL_EXPORTER_OTLP_* variables (headers, timeout,
	// compression, certificates) still apply. "" exports only when
	// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is
	// set.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// ServiceName is the service.name resource attribute of exported
	// spans. Default: OTEL_SERVICE_NAME when set, else DefaultServiceName.
	ServiceName string `yaml:"service_name"`
	// SampleRatio is the share (0 to 1) of the traces this gateway starts
	// that are recorded and exported; default DefaultSampleRatio (the
	// config loader applies it; 0 here records none). A request with a
	// traceparent follows its caller's sampled flag (parent-based).
	SampleRatio float64 `yaml:"sample_ratio"`
}

// CheckEndpoint says what is wrong with an OTLP/HTTP collector URL
// (telemetry.otlp_endpoint, or the OTEL_EXPORTER_OTLP_*ENDPOINT variables),
// "" when nothing is. Credentials belong in OTEL_EXPORTER_OTLP_HEADERS,
// never in a URL that ends up in logs.
func CheckEndpoint(raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Hostname() == "":
		return "must be an http(s) URL with a host, e.g. \"http://otel-collector:4318\""
	case u.User != nil:
		return "must not carry credentials (put them in OTEL_EXPORTER_OTLP_HEADERS)"
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(raw, "?") || strings.HasSuffix(raw, "#"):
		return "must not have a query or fragment"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "port must be a number from 1 to 65535"
		}
	}
	return ""
}

// Options configure Open.
type Options struct {
	Config
	// Logger receives export failures. Default: discard.
	Logger *slog.Logger
	// LookupEnv reads the environment (the OTEL_EXPORTER_OTLP_*ENDPOINT
	// variables and OTEL_SERVICE_NAME); nil means os.LookupEnv. Tests
	// substitute it. The exporter itself reads the remaining OTLP
	// variables from the process environment.
	LookupEnv func(string) (string, bool)
}

// Tracing is the gateway's tracing: a tracer provider when export is on,
// none when it is off.
type Tracing struct {
	tp       *sdktrace.TracerProvider // nil: export off
	endpoint string                   // where spans go, for the log
}

// Open builds the tracing o describes. Export is on when
// o.OTLPEndpoint is set (spans go to its TracesPath) or, failing that,
// when OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is
// set (as the OpenTelemetry SDK reads them). Otherwise Open returns a
// Tracing with no provider. An endpoint variable that is not an http(s)
// URL is an error naming it, rather than spans silently going nowhere.
func Open(ctx context.Context, o Options) (*Tracing, error) {
	lookup := o.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var opts []otlptracehttp.Option
	endpoint := ""
	switch {
	case o.OTLPEndpoint != "":
		if problem := CheckEndpoint(o.OTLPEndpoint); problem != "" {
			return nil, fmt.Errorf("telemetry.otlp_endpoint %s", problem)
		}
		endpoint = strings.TrimRight(o.OTLPEndpoint, "/") + TracesPath
		opts = append(opts, otlptracehttp.WithEndpointURL(endpoint))
	default:
		for _, name := range []string{EnvTracesEndpoint, EnvEndpoint} {
			v, ok := lookup(name)
			if !ok || v == "" {
				continue
			}
			if problem := CheckEndpoint(v); problem != "" {
				return nil, fmt.Errorf("environment variable %s %s", name, problem)
			}
			endpoint = v
			if name == EnvEndpoint {
				endpoint = strings.TrimRight(v, "/") + TracesPath
			}
			// Given explicitly, so that the URL checked is the URL used.
			opts = append(opts, otlptracehttp.WithEndpointURL(endpoint))
			break
		}
	}
	if endpoint == "" {
		return &Tracing{}, nil
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
	}
	name := o.ServiceName
	if name == "" {
		if v, ok := lookup("OTEL_SERVICE_NAME"); ok && v != "" {
			name = v
		} else {
			name = DefaultServiceName
		}
	}
	// OTEL_RESOURCE_ATTRIBUTES adds to the resource; service.name is ours.
	res, err := resource.Merge(resource.Environment(), resource.NewSchemaless(attribute.String("service.name", name)))
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	// Request attributes (url.path, user_agent.original) are the
	// caller's, before authentication: bounded, so that a queue of spans
	// cannot hold megabytes of an attacker's URLs each.
	limits := sdktrace.NewSpanLimits() // OTEL_SPAN_* variables
	if limits.AttributeValueLengthLimit < 0 || limits.AttributeValueLengthLimit > MaxAttributeLength {
		limits.AttributeValueLengthLimit = MaxAttributeLength
	}
	tp := sdktrace.NewTracerProvider(
		// The batcher's queue is bounded (2048 spans, OTEL_BSP_*): a slow
		// or unreachable collector drops spans, never blocks a request.
		sdktrace.WithBatcher(exp),
		sdktrace.WithSpanLimits(limits),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.SampleRatio))),
	)
	if o.Logger != nil {
		// The SDK reports export failures only through its global handler.
		log := o.Logger
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("trace export failed", "err", err)
		}))
	}
	return &Tracing{tp: tp, endpoint: endpoint}, nil
}

// Enabled reports whether spans are recorded and exported.
func (t *Tracing) Enabled() bool { return t != nil && t.tp != nil }

// Endpoint is the URL spans are posted to, "" when export is off.
func (t *Tracing) Endpoint() string {
	if t == nil {
		return ""
	}
	return t.endpoint
}

// Provider is the tracer provider, nil when export is off. Components
// given nil record no span but still carry incoming trace context.
func (t *Tracing) Provider() trace.TracerProvider {
	if !t.Enabled() {
		return nil
	}
	return t.tp
}

// ForceFlush exports the spans ended so far.
func (t *Tracing) ForceFlush(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	return t.tp.ForceFlush(ctx)
}

// Shutdown exports the spans ended so far and stops the exporter. It
// returns when they are sent or ctx ends, whichever is first: bound it
// with a deadline so that an unreachable collector cannot hold up the
// gateway's exit. Spans ended afterwards are dropped.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.Enabled() {
		return nil
	}
	err := t.tp.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("telemetry: spans not flushed before shutdown ended: %w", err)
	}
	return err
}
