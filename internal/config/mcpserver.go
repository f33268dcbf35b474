package config

import (
	"net/url"
	"strings"
	"time"
)

// MCPServer configures the MCP front door: streamable HTTP at /mcp on
// the gateway's listener, with its RFC 9728 protected resource metadata
// at /.well-known/oauth-protected-resource/mcp.
type MCPServer struct {
	// Enabled (default true) serves /mcp; false answers it 404.
	Enabled *bool `yaml:"enabled"`
	// Resource is the public URL of /mcp as clients reach it (behind a
	// proxy, https://gateway.example.com/mcp): the "resource" of the
	// metadata document and the base of the resource_metadata URL in a
	// 401. Default: built from each request's Host.
	Resource string `yaml:"resource"`
	// AllowedOrigins are the browser origins (scheme://host[:port]) that
	// may call /mcp besides the gateway's own. A request with another
	// Origin is refused (403); one without Origin (a non-browser client)
	// is let through to authentication.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// SessionTimeout ends an idle MCP session (revisions with sessions);
	// default 30m.
	SessionTimeout time.Duration `yaml:"session_timeout"`
}

// On reports whether /mcp is served.
func (m MCPServer) On() bool { return m.Enabled == nil || *m.Enabled }

func (v *validator) mcpServer(m MCPServer) {
	if m.SessionTimeout < 0 || (m.SessionTimeout > 0 && m.SessionTimeout < time.Second) {
		v.add("mcp.session_timeout", "must be at least 1s (default 30m)")
	}
	if m.Resource != "" {
		u, err := url.Parse(m.Resource)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			v.add("mcp.resource", "must be an absolute http(s) URL without credentials, query or fragment (the public URL of /mcp)")
		}
	}
	for i, o := range m.AllowedOrigins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.User != nil || u.RawQuery != "" || strings.Contains(o, "*") {
			v.add("mcp.allowed_origins", "entry %d: %q is not an origin (scheme://host[:port], no wildcard)", i, o)
		}
	}
}
