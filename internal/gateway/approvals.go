package gateway

import (
	"context"
	"time"
)

// approvalSweep is how often held calls past their expiry are moved to
// expired (and audited) when nobody reads them.
const approvalSweep = 30 * time.Second

// sweepApprovals expires overdue held calls of every tenant, and drops
// full rate-limit buckets (run every approvalSweep).
func (g *Gateway) sweepApprovals(ctx context.Context) {
	for tenant := range g.cfg.Tenants {
		if err := g.pipeline.ExpireDue(ctx, tenant); err != nil && ctx.Err() == nil {
			g.log.Warn("expiring held calls failed", "tenant", tenant, "err", err)
		}
	}
	// Full rate-limit buckets mean the same as none: drop them, so
	// that keys policy used once do not stay.
	if _, err := g.db.Limiter().Prune(ctx); err != nil && ctx.Err() == nil {
		g.log.Warn("pruning rate-limit buckets failed", "err", err)
	}
}
