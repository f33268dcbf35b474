package gateway

import (
	"context"
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

// keyPruneInterval is how often expired idempotency keys are deleted: a
// tenth of their TTL, so that none outlives it by more than 10%, and at
// most hourly. A key that expired but is still there does not answer
// retries anyway: a new reservation replaces it.
func keyPruneInterval(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		ttl = pipeline.DefaultKeyTTL
	}
	return max(min(ttl/10, time.Hour), time.Second)
}

// pruneKeys deletes the idempotency keys expired at now; a failure is
// logged and retried next time.
func (g *Gateway) pruneKeys(ctx context.Context, now time.Time) {
	n, err := g.db.Idempotency().Prune(ctx, now)
	switch {
	case err != nil && ctx.Err() != nil:
	case err != nil:
		g.log.Warn("pruning idempotency keys failed", "err", err, "keys_pruned", n)
	case n > 0:
		g.log.Debug("pruned idempotency keys", "keys_pruned", n)
	}
}
