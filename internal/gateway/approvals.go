package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/internal/approval"
	"github.com/toolgate/toolgate/internal/config"
)

// approvalSweep is how often held calls past their expiry are moved to
// expired (and audited) when nobody reads them.
const approvalSweep = 30 * time.Second

// OpenApprovalStore opens the store of held calls in the audit database.
func OpenApprovalStore(ctx context.Context, cfg *config.Config) (approval.Store, error) {
	switch cfg.Audit.Driver {
	case "sqlite":
		return approval.OpenSQLite(ctx, cfg.Audit.DSN)
	case "postgres":
		return approval.OpenPostgres(ctx, cfg.Audit.DSN)
	}
	return nil, &config.Error{File: cfg.File, Key: "audit.driver", Problem: fmt.Sprintf("driver %q is not available in this build", cfg.Audit.Driver)}
}

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
