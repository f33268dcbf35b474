package backend

import (
	"context"
	"errors"
	"log/slog"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/pipeline"
	"github.com/toolgate/toolgate/internal/service"
)

// NewHealth is the Health service over the policy (pipeline.Engine of
// the engine) and the audit log.
func NewHealth(engine pipeline.Policy, log Pinger, logger *slog.Logger) service.Health {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return health{engine, log, logger}
}

// Pinger is what readiness asks of the audit log (*audit.Log): whether it
// can commit.
type Pinger interface {
	Ping(ctx context.Context) error
}

type health struct {
	engine pipeline.Policy
	log    Pinger
	logger *slog.Logger
}

func (h health) Check(ctx context.Context) map[string]string {
	checks := map[string]string{"policy": "ok", "audit": "ok"}
	if _, err := h.engine.Current(); err != nil {
		checks["policy"] = "not loaded"
	}
	switch err := h.log.Ping(ctx); {
	case err == nil:
	case errors.Is(err, audit.ErrCommitsFailing):
		checks["audit"] = "commits failing"
		h.logger.Warn("readiness: audit commits are failing", "err", err)
	default:
		checks["audit"] = "unreachable"
		h.logger.Warn("readiness: audit store unreachable", "err", err)
	}
	return checks
}
