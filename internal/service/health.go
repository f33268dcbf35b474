package service

import "context"

// Health says whether calls can be served, for readiness probes.
type Health interface {
	// Check reports each dependency as "ok" or one of a few fixed words
	// (no error detail, no tenant data): "policy" ("not loaded") and
	// "audit" ("commits failing", "unreachable"). Errors go to the log.
	Check(ctx context.Context) map[string]string
}
