package backend

import (
	"context"
	"errors"
	"log/slog"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/decision"
	"github.com/toolgate/toolgate/internal/service"
)

// NewHealth is the Health service over the engine and the audit log.
func NewHealth(engine *decision.Engine, log *audit.Log, logger *slog.Logger) service.Health {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return health{engine, log, logger}
}

type health struct {
	engine *decision.Engine
	log    *audit.Log
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
