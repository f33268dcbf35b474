package gateway

import (
	"context"
	"time"
)

// pruneInterval is how often audit retention runs: a tenth of the
// retention, so that nothing outlives it by more than 10%, and at least
// hourly, so that each run has little to delete.
func pruneInterval(retention time.Duration) time.Duration {
	return min(retention/10, time.Hour)
}

// pruneAudit deletes the audit events older than cutoff. Log.Prune logs
// what it removed and refused; a failure is logged and retried next time.
func (g *Gateway) pruneAudit(ctx context.Context, cutoff time.Time) {
	res, err := g.audit.Prune(ctx, cutoff)
	switch {
	case err != nil && ctx.Err() != nil:
		// Shutting down: the next start prunes the rest.
	case err != nil:
		g.log.Error("audit retention run failed", "err", err, "events_pruned", res.Events, "tenants", res.Tenants)
	default:
		g.log.Debug("audit retention run", "events_pruned", res.Events, "tenants", res.Tenants, "cutoff", cutoff.UTC())
	}
}
