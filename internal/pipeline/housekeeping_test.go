package pipeline

import (
	"testing"
	"time"
)

func TestKeyPruneIntervalIsATenthOfTheTTLBetweenASecondAndAnHour(t *testing.T) {
	for _, tc := range []struct{ ttl, want time.Duration }{
		{24 * time.Hour, time.Hour},
		{time.Minute, 6 * time.Second},
		{5 * time.Second, time.Second},
		{0, time.Hour}, // the default TTL
	} {
		if got := KeyPruneInterval(tc.ttl); got != tc.want {
			t.Errorf("KeyPruneInterval(%v) = %v, want %v", tc.ttl, got, tc.want)
		}
	}
}
