package gateway

import (
	"log/slog"
	"net/url"

	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/mcpserver"
	"github.com/toolgate/toolgate/internal/metrics"
	"github.com/toolgate/toolgate/internal/ratelimit"
	"github.com/toolgate/toolgate/internal/service"
)

// mcpOptions wires the MCP front door from the configuration: the same
// authenticator, Calls and Approvals services as REST (the latter for
// ask-user questions put to the user through the client).
func mcpOptions(cfg *config.Config, svc service.Services, authn *auth.Authenticator, m *metrics.Metrics, log *slog.Logger, buckets *ratelimit.Memory) mcpserver.Options {
	j := cfg.Auth.JWT
	var servers []string
	switch {
	case j.OIDCIssuer != "":
		servers = []string{j.OIDCIssuer}
	case isURL(j.Issuer):
		servers = []string{j.Issuer}
	}
	if j.Audience == "" && (j.HS256SecretFile != "" || j.JWKSFile != "" || j.JWKSURL != "" || j.OIDCIssuer != "") {
		log.Warn("mcp: auth.jwt.audience is not set, so /mcp refuses every JWT (a token must be bound to this gateway); API keys still work")
	}
	return mcpserver.Options{
		Calls: svc.Calls, Questions: svc.Approvals, Auth: authn, JWTAudience: j.Audience, AuthorizationServers: servers,
		Resource: cfg.MCP.Resource, AllowedOrigins: cfg.MCP.AllowedOrigins,
		MaxBodyBytes: cfg.Limits.MaxBodyBytes, Metrics: m, Logger: log.With("front_door", "mcp"),
		SessionTimeout: cfg.MCP.SessionTimeout,
		TenantRate:     cfg.Limits.TenantRate, TenantBurst: cfg.Limits.TenantBurst, TenantBuckets: buckets,
	}
}

func isURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}
