package telemetry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/internal/telemetry/otlptest"
)

const (
	callerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan   = "00f067aa0ba902b7"
	callerHeader = "00-" + callerTrace + "-" + callerSpan + "-01"
)

// env is a LookupEnv over a fixed map: the tests never read or change
// the process environment.
func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func open(t *testing.T, tc telemetry.Config, vars map[string]string) *telemetry.Tracing {
	t.Helper()
	if tc.SampleRatio == 0 {
		tc.SampleRatio = 1
	}
	tr, err := telemetry.Open(t.Context(), telemetry.Options{Config: tc, LookupEnv: env(vars)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Shutdown(context.Background()) })
	return tr
}

// oneSpan ends a span named name and flushes it.
func oneSpan(t *testing.T, tr *telemetry.Tracing, name string) trace.SpanContext {
	t.Helper()
	_, span := tr.Provider().Tracer("test").Start(t.Context(), name)
	span.End()
	if err := tr.ForceFlush(t.Context()); err != nil {
		t.Fatal(err)
	}
	return span.SpanContext()
}

func TestNothingIsExportedByDefault(t *testing.T) {
	tr := open(t, telemetry.Config{}, nil)
	if tr.Enabled() || tr.Provider() != nil || tr.Endpoint() != "" {
		t.Fatalf("tracing on without an endpoint: %+v", tr)
	}
	// Empty variables are unset ones.
	tr = open(t, telemetry.Config{}, map[string]string{telemetry.EnvEndpoint: "", telemetry.EnvTracesEndpoint: ""})
	if tr.Enabled() {
		t.Fatal("tracing on with empty endpoint variables")
	}
	if err := tr.ForceFlush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestExportsToTheConfiguredCollector(t *testing.T) {
	rx := otlptest.New(t)
	other := otlptest.New(t)
	// The configured endpoint wins over the environment's; a trailing
	// slash does not double the path.
	tr := open(t, telemetry.Config{OTLPEndpoint: rx.URL + "/"}, map[string]string{telemetry.EnvEndpoint: other.URL})
	if !tr.Enabled() || tr.Endpoint() != rx.URL+"/v1/traces" {
		t.Fatalf("endpoint %q", tr.Endpoint())
	}
	sc := oneSpan(t, tr, "probe")
	got := rx.Spans()
	if len(got) != 1 || got[0].GetName() != "probe" || got[0].TraceID != sc.TraceID().String() || got[0].Service != "toolgate" {
		t.Fatalf("received %+v", got)
	}
	if bad := rx.Bad(); len(bad) > 0 {
		t.Fatalf("malformed exports: %v", bad)
	}
	if other.Requests() != 0 {
		t.Fatal("the environment's collector got spans although telemetry.otlp_endpoint is set")
	}
}

func TestStandardEnvironmentVariables(t *testing.T) {
	t.Run("OTEL_EXPORTER_OTLP_ENDPOINT is a base URL", func(t *testing.T) {
		rx := otlptest.New(t)
		tr := open(t, telemetry.Config{}, map[string]string{telemetry.EnvEndpoint: rx.URL, "OTEL_SERVICE_NAME": "gw-eu"})
		oneSpan(t, tr, "probe")
		if got := rx.Spans(); len(got) != 1 || got[0].Service != "gw-eu" {
			t.Fatalf("received %+v", got)
		}
	})
	t.Run("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as is and wins", func(t *testing.T) {
		rx, other := otlptest.New(t), otlptest.New(t)
		tr := open(t, telemetry.Config{ServiceName: "configured"}, map[string]string{
			telemetry.EnvTracesEndpoint: rx.URL + "/v1/traces", telemetry.EnvEndpoint: other.URL, "OTEL_SERVICE_NAME": "env",
		})
		oneSpan(t, tr, "probe")
		if got := rx.Spans(); len(got) != 1 || got[0].Service != "configured" {
			t.Fatalf("received %+v", got)
		}
		if other.Requests() != 0 {
			t.Fatal("the base-URL variable was used over the traces variable")
		}
	})
	t.Run("a malformed variable fails to start, naming it", func(t *testing.T) {
		for _, v := range []string{"collector:4318", "http://user:pw@collector:4318", "ftp://collector", "http://"} {
			_, err := telemetry.Open(t.Context(), telemetry.Options{LookupEnv: env(map[string]string{telemetry.EnvEndpoint: v})})
			if err == nil || !strings.Contains(err.Error(), telemetry.EnvEndpoint) {
				t.Errorf("%q: %v", v, err)
			}
		}
	})
}

func TestSamplingIsParentBased(t *testing.T) {
	rx := otlptest.New(t)
	tr, err := telemetry.Open(t.Context(), telemetry.Options{
		Config: telemetry.Config{OTLPEndpoint: rx.URL, SampleRatio: 0}, LookupEnv: env(nil),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown(context.Background())
	tracer := tr.Provider().Tracer("test")
	// A trace started here, at ratio 0: not recorded, but it has an id.
	_, root := tracer.Start(t.Context(), "root")
	if root.IsRecording() || !root.SpanContext().TraceID().IsValid() {
		t.Fatalf("root span: recording %v, trace %s", root.IsRecording(), root.SpanContext().TraceID())
	}
	root.End()
	// A caller that sampled its trace: recorded, in the caller's trace.
	h := http.Header{"Traceparent": {callerHeader}}
	_, child := tracer.Start(telemetry.Propagator.Extract(t.Context(), propagation.HeaderCarrier(h)), "child")
	child.End()
	if err := tr.ForceFlush(t.Context()); err != nil {
		t.Fatal(err)
	}
	got := rx.Spans()
	if len(got) != 1 || got[0].GetName() != "child" || got[0].TraceID != callerTrace || got[0].ParentID != callerSpan {
		t.Fatalf("received %+v", got)
	}
}

// A collector that never answers cannot hold up shutdown beyond its
// deadline.
func TestShutdownIsBounded(t *testing.T) {
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(release)
	tr, err := telemetry.Open(t.Context(), telemetry.Options{Config: telemetry.Config{OTLPEndpoint: hang.URL, SampleRatio: 1}, LookupEnv: env(nil)})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tr.Provider().Tracer("test").Start(t.Context(), "stuck")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- tr.Shutdown(ctx) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Shutdown reported success although the collector never answered")
		}
	case <-time.After(time.Minute): // a hang, not a slow machine
		t.Fatal("Shutdown did not return after its deadline")
	}
}
