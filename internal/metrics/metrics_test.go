package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestCountsByLabelSumsOverTheOtherLabels(t *testing.T) {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "x_total", Help: "x"}, []string{"cause", "tool"})
	v.WithLabelValues("policy", "a").Add(2)
	v.WithLabelValues("policy", "b").Inc()
	v.WithLabelValues("audit", "a").Inc()
	got := CountsByLabel(v, "cause")
	if len(got) != 2 || got["policy"] != 3 || got["audit"] != 1 {
		t.Fatalf("CountsByLabel = %v", got)
	}
	if got := CountsByLabel(v, "none"); len(got) != 0 {
		t.Fatalf("an unknown label: %v", got)
	}
}
