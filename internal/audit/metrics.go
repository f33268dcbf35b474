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
	// MetricIntegrated counts events this process integrated into their
	// tenant's tree; MetricIntegrateSeconds times its integration
	// transactions.
	MetricIntegrated       = "toolgate_audit_integrated_events_total"
	MetricIntegrateSeconds = "toolgate_audit_integrate_seconds"
	// MetricIntegrateFailures counts failed integration transactions.
	MetricIntegrateFailures = "toolgate_audit_integrate_failures_total"
	// MetricCheckpoints counts checkpoints this process signed;
	// MetricCheckpointRefused those it refused to sign because the stored
	// tree does not extend the latest checkpoint, or that checkpoint is
	// signed by another key.
	MetricCheckpoints       = "toolgate_audit_checkpoints_total"
	MetricCheckpointRefused = "toolgate_audit_checkpoints_refused_total"
	// MetricIntegrationLag is the age of the oldest event of each
	// integration batch when it was integrated: how long after its commit
	// an event waited to be queryable by anything but its call or
	// decision id, and to be in the tree.
	MetricIntegrationLag = "toolgate_audit_integration_lag_seconds"
)

// logMetrics are a Log's collectors.
type logMetrics struct {
	ok, overloaded, failed prometheus.Counter
	batchSize              prometheus.Histogram
	commit                 prometheus.Histogram
	verifyFailures         prometheus.Counter
	pruned                 prometheus.Counter
	integrated             prometheus.Counter
	integrateSeconds       prometheus.Histogram
	integrateFailures      prometheus.Counter
	integrationLag         prometheus.Histogram
	checkpoints            prometheus.Counter
	checkpointRefused      prometheus.Counter
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
			Name: MetricVerify, Help: "Audit log verifications that found a deleted, changed or reordered event.",
		}),
		integrated: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricIntegrated, Help: "Audit events this process integrated into their tenant's Merkle tree.",
		}),
		integrateSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: MetricIntegrateSeconds, Help: "Latency of one audit integration transaction.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		integrationLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: MetricIntegrationLag, Help: "Age of the oldest event of each audit integration batch when it was integrated (how long committed events wait to be queryable and in the tree).",
			Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
		integrateFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricIntegrateFailures, Help: "Audit integration transactions that failed.",
		}),
		checkpoints: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricCheckpoints, Help: "Audit checkpoints this process signed.",
		}),
		checkpointRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricCheckpointRefused, Help: "Audit checkpoints not signed: the stored tree does not extend the latest checkpoint, or that one is signed by another key.",
		}),
		pruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricPruned, Help: "Audit events deleted by retention (audit.retention).",
		}),
	}
	depth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: MetricQueueDepth, Help: "Audit events queued for the writer.",
	}, func() float64 { return float64(queueLen()) })
	if reg != nil {
		for _, c := range []prometheus.Collector{appends, m.batchSize, m.commit, m.verifyFailures, m.pruned,
			m.integrated, m.integrateSeconds, m.integrationLag, m.integrateFailures, m.checkpoints, m.checkpointRefused, depth} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}
