package pipeline

import (
	"context"
	"slices"
	"time"

	"github.com/toolgate/toolgate/internal/lifecycle"
	"github.com/toolgate/toolgate/internal/ratelimit"
)

// HeldSweep is how often held calls and questions past their expiry are
// moved to expired (and audited) when nobody reads them.
const HeldSweep = 30 * time.Second

// KeyPruneInterval is how often expired idempotency keys are deleted: a
// tenth of their TTL, so that none outlives it by more than 10%, at most
// hourly and at least every second. A key that expired but is still there
// does not answer retries anyway: a new reservation replaces it.
func KeyPruneInterval(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		ttl = DefaultKeyTTL
	}
	return max(min(ttl/10, time.Hour), time.Second)
}

// Runners is the pipeline's background work for tenants: held-call and
// question expiry (with full rate-limit buckets dropped) every HeldSweep,
// and expired idempotency keys pruned every KeyPruneInterval. Every
// replica runs them; what they delete does not conflict.
func (p *Pipeline) Runners(tenants []string) []lifecycle.Runner {
	tenants = slices.Sorted(slices.Values(tenants))
	rs := []lifecycle.Runner{
		lifecycle.Every("held-call expiry", HeldSweep, func(ctx context.Context) { p.SweepHeld(ctx, tenants) }),
	}
	if p.o.Keys != nil {
		rs = append(rs, lifecycle.Every("idempotency key pruning", KeyPruneInterval(p.o.KeyTTL), func(ctx context.Context) {
			p.PruneKeys(ctx, p.o.Now())
		}))
	}
	return rs
}

// SweepHeld expires the overdue held calls and questions of tenants, and
// drops full rate-limit buckets (which mean the same as none, so that
// keys policy used once do not stay). Failures are logged and retried at
// the next sweep.
func (p *Pipeline) SweepHeld(ctx context.Context, tenants []string) {
	for _, tenant := range tenants {
		if err := p.ExpireDue(ctx, tenant); err != nil && ctx.Err() == nil {
			p.o.Logger.Warn("expiring held calls failed", "tenant", tenant, "err", err)
		}
	}
	if pr, ok := p.o.Limiter.(ratelimit.Pruner); ok {
		if _, err := pr.Prune(ctx); err != nil && ctx.Err() == nil {
			p.o.Logger.Warn("pruning rate-limit buckets failed", "err", err)
		}
	}
}

// PruneKeys deletes the idempotency keys expired at now; a failure is
// logged and retried next time.
func (p *Pipeline) PruneKeys(ctx context.Context, now time.Time) {
	n, err := p.o.Keys.Prune(ctx, now)
	switch {
	case err != nil && ctx.Err() != nil:
	case err != nil:
		p.o.Logger.Warn("pruning idempotency keys failed", "err", err, "keys_pruned", n)
	case n > 0:
		p.o.Logger.Debug("pruned idempotency keys", "keys_pruned", n)
	}
}
