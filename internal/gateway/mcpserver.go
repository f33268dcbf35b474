package gateway

import (
	"fmt"
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
// ask-user questions put to the user through the client), and the
// requestState key from mcp.request_state_key_file (created on first
// start; replicas must share the file).
func mcpOptions(cfg *config.Config, svc service.Services, authn *auth.Authenticator, m *metrics.Metrics, log *slog.Logger, buckets *ratelimit.Memory) (mcpserver.Options, error) {
	var key []byte // nil: a random key of this process
	if f := cfg.MCP.RequestStateKeyFile; f != "" {
		var created bool
		var err error
		if key, created, err = mcpserver.LoadOrCreateStateKey(f); err != nil {
			return mcpserver.Options{}, &config.Error{File: cfg.File, Key: "mcp.request_state_key_file", Problem: err.Error()}
		}
		if created {
			log.Info("created the MCP requestState key; replicas must share this file", "file", f)
		}
	} else {
		// Only a Config not made by config.Load, which sets a default.
		log.Warn("mcp.request_state_key_file is not set: requestStates are accepted by this process only")
	}
	var previous [][]byte
	for i, f := range cfg.MCP.RequestStatePreviousKeyFiles {
		k, err := mcpserver.ReadStateKey(f)
		if err != nil {
			return mcpserver.Options{}, &config.Error{File: cfg.File, Key: "mcp.request_state_previous_key_files", Problem: fmt.Sprintf("entry %d: %v", i, err)}
		}
		previous = append(previous, k)
	}
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
		StateKey: key, PreviousStateKeys: previous,
	}, nil
}

func isURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}
