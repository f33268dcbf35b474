// Package metrics holds the gateway's request-path Prometheus collectors.
// Collectors are registered on an explicit registry passed in by the
// composition root; there are no global metrics.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metrics are the request-path collectors.
type Metrics struct {
	HTTPRequests    *prometheus.CounterVec   // route, code
	HTTPDuration    *prometheus.HistogramVec // route
	Unauthenticated *prometheus.CounterVec   // reason
	Calls           *prometheus.CounterVec   // mode (call|decision), tool, outcome
	StageDuration   *prometheus.HistogramVec // stage
	FailClosed      *prometheus.CounterVec   // cause
	ResultAuditLost prometheus.Counter
	Idempotency     *prometheus.CounterVec // result (replayed|waited|conflict|unfinished|unsettled)
	// RateLimited counts requests a limit refused (429), by which limit:
	// "policy" (the rate_limit obligation), "tenant_rate", "max_pending"
	// or "long_polls". Never by key, tenant or principal: those are
	// unbounded.
	RateLimited *prometheus.CounterVec // limit
}

// ToolLabel is the tool label value for a call: the configured tool's name,
// or "unknown" when spec is nil (a name the gateway does not serve).
func ToolLabel(name string, known bool) string {
	if !known {
		return "unknown"
	}
	return name
}

// New creates the collectors and registers them on reg (nil: unregistered).
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		HTTPRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_http_requests_total", Help: "HTTP requests by route pattern and status code.",
		}, []string{"route", "code"}),
		HTTPDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "toolgate_http_request_duration_seconds", Help: "HTTP request latency by route pattern.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"route"}),
		Unauthenticated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_unauthenticated_total", Help: "Requests rejected with 401, by reason.",
		}, []string{"reason"}),
		Calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_calls_total", Help: "Tool calls and decisions by mode, tool and outcome. tool is a configured tool's name, or \"unknown\" for any name the gateway does not serve (so callers cannot grow the label set).",
		}, []string{"mode", "tool", "outcome"}),
		StageDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "toolgate_stage_duration_seconds", Help: "Time spent per pipeline stage.",
			Buckets: []float64{.00001, .000025, .00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .5, 1, 5, 30},
		}, []string{"stage"}),
		FailClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_fail_closed_total", Help: "Calls refused with 503 because a dependency failed, by cause.",
		}, []string{"cause"}),
		ResultAuditLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "toolgate_audit_result_write_failures_total", Help: "Result events that could not be written after a tool ran (its decision event was committed).",
		}),
		Idempotency: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_idempotency_total",
			Help: "Requests with a call_id the caller chose, by what their key did: replayed (answered the recorded response), waited (waited for the first request first), conflict (409: another request used the call_id), unfinished (409: the first request never finished), unsettled (a response the store could not record, or a key it could not release, before the key's lease ended).",
		}, []string{"result"}),
		RateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_rate_limited_total", Help: "Requests refused with 429 by a limit: policy (the rate_limit obligation), tenant_rate, max_pending or long_polls.",
		}, []string{"limit"}),
	}
	if reg != nil {
		reg.MustRegister(m.HTTPRequests, m.HTTPDuration, m.Unauthenticated, m.Calls, m.StageDuration, m.FailClosed, m.ResultAuditLost,
			m.Idempotency, m.RateLimited)
	}
	return m
}

// CountsByLabel reads a counter vector's current values summed by one
// label (the console shows fail-closed causes this way).
func CountsByLabel(v *prometheus.CounterVec, label string) map[string]float64 {
	out := map[string]float64{}
	ch := make(chan prometheus.Metric, 64)
	go func() {
		v.Collect(ch)
		close(ch)
	}()
	for m := range ch {
		var pb dto.Metric
		if m.Write(&pb) != nil || pb.Counter == nil {
			continue
		}
		for _, l := range pb.Label {
			if l.GetName() == label {
				out[l.GetValue()] += pb.Counter.GetValue()
			}
		}
	}
	return out
}
