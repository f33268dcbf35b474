package audit_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/internal/audit"
)

// The integration lag histogram says how long committed events waited to
// be queryable: an event stamped three seconds before it is integrated
// is observed as at least three seconds old.
func TestIntegrationLagIsObserved(t *testing.T) {
	ctx := t.Context()
	reg := prometheus.NewRegistry()
	s := openSQLite(t, filepath.Join(t.TempDir(), "audit.db"))
	l, err := audit.NewLog(s, audit.LogOptions{Registerer: reg,
		Now: func() time.Time { return time.Now().Add(-3 * time.Second) }})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ev := &audit.Event{Tenant: "acme", Principal: "alice", Tool: "read-file", Phase: audit.PhaseDecision, Outcome: "allow", CallID: "c-1"}
	if err := l.Append(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != audit.MetricIntegrationLag {
			continue
		}
		h := mf.GetMetric()[0].GetHistogram()
		if h.GetSampleCount() != 1 || h.GetSampleSum() < 3 || h.GetSampleSum() > 60 {
			t.Fatalf("lag: %d samples, sum %.2f s; want one of 3 s or more", h.GetSampleCount(), h.GetSampleSum())
		}
		return
	}
	t.Fatalf("%s not registered (%d metrics)", audit.MetricIntegrationLag, len(mfs))
}
