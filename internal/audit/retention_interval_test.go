package audit

import (
	"testing"
	"time"
)

func TestPruneIntervalIsATenthOfRetentionAtMostHourly(t *testing.T) {
	for _, tc := range []struct{ retention, want time.Duration }{
		{time.Hour, 6 * time.Minute},
		{2 * time.Hour, 12 * time.Minute},
		{10 * time.Hour, time.Hour},
		{720 * time.Hour, time.Hour},
	} {
		if got := PruneInterval(tc.retention); got != tc.want {
			t.Errorf("PruneInterval(%v) = %v, want %v", tc.retention, got, tc.want)
		}
	}
}
