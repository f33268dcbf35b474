package gateway

import (
	"context"
	"time"
)

// approvalSweep is how often held calls past their expiry are moved to
// expired (and audited) when nobody reads them.
const approvalSweep = 30 * time.Second

// sweepApprovals expires overdue held calls of every tenant until ctx ends.
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
	}
}
