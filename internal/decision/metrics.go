package decision

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Error kinds of toolgate_policy_decision_errors_total.
const (
	kindEvaluation = iota // OPA returned an error
	kindMalformed         // the result broke the contract
	kindCanceled          // the caller's context ended first
	numKinds
)

var kindNames = [numKinds]string{"evaluation", "malformed", "canceled"}

// metrics are the engine's Prometheus collectors. The per-entrypoint
// children are resolved once so the hot path does no label lookups.
type metrics struct {
	reloads  *prometheus.CounterVec
	revision *prometheus.GaugeVec

	latency [numEntrypoints]prometheus.Observer
	errors  [numEntrypoints][numKinds]prometheus.Counter
	cache   [numEntrypoints][2]prometheus.Counter // [cacheHit], [cacheMiss]
}

const (
	cacheHit = iota
	cacheMiss
)

func newMetrics(reg prometheus.Registerer) *metrics {
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_policy_reloads_total",
		Help: "Policy loads by result (ok: a revision was compiled and serves; error: it was rejected and the previous revision kept serving).",
	}, []string{"result"})
	revision := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "toolgate_policy_revision_info",
		Help: "The policy revision serving now (value 1).",
	}, []string{"revision"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_policy_decision_errors_total",
		Help: "Policy evaluations that failed closed, by entrypoint and kind (evaluation, malformed, canceled).",
	}, []string{"entrypoint", "kind"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "toolgate_policy_decision_duration_seconds",
		Help:    "Time to evaluate one policy entrypoint.",
		Buckets: []float64{5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 1e-2, 5e-2},
	}, []string{"entrypoint"})

	cache := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_policy_decision_cache_total",
		Help: "Keyed policy evaluations answered from the revision's decision cache (hit) or evaluated and stored (miss), by entrypoint.",
	}, []string{"entrypoint", "result"})
	m := &metrics{
		reloads:  register(reg, reloads),
		revision: register(reg, revision),
	}
	errs = register(reg, errs)
	latency = register(reg, latency)
	cache = register(reg, cache)
	for ep := range numEntrypoints {
		m.latency[ep] = latency.WithLabelValues(ep.String())
		m.cache[ep][cacheHit] = cache.WithLabelValues(ep.String(), "hit")
		m.cache[ep][cacheMiss] = cache.WithLabelValues(ep.String(), "miss")
		for k := range numKinds {
			m.errors[ep][k] = errs.WithLabelValues(ep.String(), kindNames[k])
		}
	}
	// Both results exist from the start so rate() sees the first error.
	m.reloads.WithLabelValues("ok")
	m.reloads.WithLabelValues("error")
	return m
}

// register adds c to reg (if any). When an equal collector is registered
// already (a second engine on one registry), that one is shared.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		// A conflicting descriptor is a wiring bug; the engine still works
		// with unregistered collectors.
	}
	return c
}

func (m *metrics) setRevision(id string) {
	m.revision.Reset()
	m.revision.WithLabelValues(id).Set(1)
}
