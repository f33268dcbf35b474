package audit

import "github.com/prometheus/client_golang/prometheus"

// Metric names, for dashboards and tests.
const (
	MetricAppends    = "toolgate_audit_appends_total"         // counter, label result=ok|overloaded|error
	MetricBatchSize  = "toolgate_audit_batch_size"            // histogram, events per committed transaction
	MetricCommit     = "toolgate_audit_commit_seconds"        // histogram, Store.Insert latency
	MetricQueueDepth = "toolgate_audit_queue_depth"           // gauge, events waiting for the writer
	MetricVerify     = "toolgate_audit_verify_failures_total" // counter, verifications that found tampering
	MetricPruned     = "toolgate_audit_pruned_events_total"   // counter, events deleted by retention
)

// logMetrics are a Log's collectors.
type logMetrics struct {
	ok, overloaded, failed prometheus.Counter
	batchSize              prometheus.Histogram
	commit                 prometheus.Histogram
	verifyFailures         prometheus.Counter
	pruned                 prometheus.Counter
}

func newLogMetrics(reg prometheus.Registerer, queueLen func() int) (*logMetrics, error) {
	appends := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: MetricAppends, Help: "Audit events appended, by result (ok, overloaded, error).",
	}, []string{"result"})
	m := &logMetrics{
		ok:         appends.WithLabelValues("ok"),
		overloaded: appends.WithLabelValues("overloaded"),
		failed:     appends.WithLabelValues("error"),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: MetricBatchSize, Help: "Audit events per committed batch (group commit).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11), // 1 .. 1024
		}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: MetricCommit, Help: "Latency of one audit batch commit.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		verifyFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricVerify, Help: "Audit chain verifications that found a broken or tampered chain.",
		}),
		pruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricPruned, Help: "Audit events deleted by retention (audit.retention).",
		}),
	}
	depth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: MetricQueueDepth, Help: "Audit events queued for the writer.",
	}, func() float64 { return float64(queueLen()) })
	if reg != nil {
		for _, c := range []prometheus.Collector{appends, m.batchSize, m.commit, m.verifyFailures, m.pruned, depth} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
