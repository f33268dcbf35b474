package gateway

import (
	"context"
	"time"
)

// approvalSweep is how often held calls past their expiry are moved to
// expired (and audited) when nobody reads them.
const approvalSweep = 30 * time.Second

// sweepApprovals expires overdue held calls of every tenant, and drops
// full rate-limit buckets, until ctx ends.
func (g *Gateway) sweepApprovals(ctx context.Context) {
	t := time.NewTicker(approvalSweep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for tenant := range g.cfg.Tenants {
			if err := g.pipeline.ExpireDue(ctx, tenant); err != nil {
				g.log.Warn("expiring held calls failed", "tenant", tenant, "err", err)
			}
		}
		// Full rate-limit buckets mean the same as none: drop them, so
		// that keys policy used once do not stay.
		if _, err := g.db.Limiter().Prune(ctx); err != nil {
			g.log.Warn("pruning rate-limit buckets failed", "err", err)
		}
	}
}
