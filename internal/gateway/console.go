package gateway

import (
	"fmt"
	"time"

	"log/slog"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/console"
	"github.com/toolgate/toolgate/internal/metrics"
	"github.com/toolgate/toolgate/internal/service"
)

// newConsole wires the web console from the configuration: the same
// services and authenticator as the REST and MCP front doors.
func newConsole(cfg *config.Config, svc service.Services, authn *auth.Authenticator, log *slog.Logger, failClosed *prometheus.CounterVec, now func() time.Time) (*console.Server, error) {
	o := console.Options{
		FailClosed: func() map[string]float64 { return metrics.CountsByLabel(failClosed, "cause") },
		Services:   svc, Auth: authn, PublicURL: cfg.Console.PublicURL,
		SessionTTL: cfg.Console.SessionTTL, IdleTimeout: cfg.Console.IdleTimeout,
		MaxBodyBytes: cfg.Limits.MaxBodyBytes, Logger: log.With("front_door", "console"),
	}
	if cfg.Console.ClientID != "" {
		var secret string
		if cfg.Console.ClientSecretFile != "" {
			b, err := os.ReadFile(cfg.Console.ClientSecretFile)
			if err != nil {
				return nil, &config.Error{File: cfg.File, Key: "console.client_secret_file", Problem: err.Error()}
			}
			secret = strings.TrimSpace(string(b))
			if secret == "" {
				return nil, &config.Error{File: cfg.File, Key: "console.client_secret_file", Problem: "the file is empty"}
			}
		}
		o.OIDC = &console.OIDCOptions{
			Issuer: cfg.Auth.JWT.OIDCIssuer, ClientID: cfg.Console.ClientID, ClientSecret: secret,
			RedirectURL: cfg.Console.RedirectURL, Scopes: cfg.Console.Scopes,
		}
	}
	o.Now = now
	c, err := console.New(o)
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	return c, nil
}
