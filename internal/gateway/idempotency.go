package gateway

import (
	"time"

	"github.com/toolgate/toolgate/internal/pipeline"
	"github.com/toolgate/toolgate/internal/tools"
)

// keyLease is how long an idempotency key may stay reserved without a
// response before its retries answer unfinished: the pipeline's default
// (15 minutes), or five times the longest time limit of a configured tool
// when that is longer (a batch call may wait for a slot behind others of
// its tenant before it runs), so that a call still running is never taken
// for an abandoned one.
func keyLease(reg *tools.Registry, defaultTimeout time.Duration) time.Duration {
	longest := defaultTimeout
	for _, t := range reg.All() {
		longest = max(longest, t.Spec().Limits.Timeout)
	}
	return max(pipeline.DefaultKeyLease, 5*longest)
}
