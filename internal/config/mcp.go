package config

import (
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/tools"
)

// Defaults of MCP upstreams (tools.mcp).
const (
	DefaultMCPTimeout       = 30 * time.Second
	DefaultMCPConcurrency   = 16
	DefaultMCPRefresh       = 60 * time.Second
	DefaultMCPResponseBytes = 1 << 20
	MinMCPRefresh           = time.Second
	MCPLockFileName         = "mcp.lock.json"
	maxMCPNamespaceBytes    = 32
)

// MCPUpstream declares one MCP server whose tools the gateway offers,
// governed: each upstream tool becomes the gateway tool "<name>-<tool>"
// (normalized to the tool-name rule).
type MCPUpstream struct {
	Name string `yaml:"name"` // namespace of its tools
	// URL is a streamable HTTP endpoint; Command starts a stdio server
	// (argv; the program is an absolute path, a path relative to the
	// config file, or a name looked up in PATH at start) inside the
	// command jail. Exactly one of the two.
	URL     string   `yaml:"url"`
	Command []string `yaml:"command"`
	// Headers are sent on every HTTP request: the upstream's own
	// credential (Authorization, an API key header), never the caller's.
	Headers map[string]string `yaml:"headers"`
	// Network gives a stdio server's jail the host's network (default:
	// none).
	Network         bool          `yaml:"network"`
	Timeout         time.Duration `yaml:"timeout"`          // per call and per discovery, default 30s
	MaxConcurrent   int           `yaml:"max_concurrent"`   // calls in flight, default 16
	RefreshInterval time.Duration `yaml:"refresh_interval"` // tools/list again, default 60s
	// Tools, when set, is the allow-list of upstream tool names offered;
	// others are ignored.
	Tools []string `yaml:"tools"`
	// Pin (default true) offers only tools whose definition matches
	// mcp.lock.json beside the config (gateway mcp pin).
	Pin *bool `yaml:"pin"`
	// Resources maps an upstream tool name to typed resources built from
	// its arguments, as tools.upstream[].resources does.
	Resources map[string][]map[string]string `yaml:"resources"`
	// MaxResponseBytes: a larger result fails the call. Default 1 MiB.
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
	// TokenExchange, when set, sends the upstream an access token from an
	// RFC 8693 token exchange (only with URL).
	TokenExchange *MCPTokenExchange `yaml:"token_exchange"`
}

// Token types of RFC 8693 §3.
const (
	TokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	TokenTypeJWT         = "urn:ietf:params:oauth:token-type:jwt"
)

// MCPTokenExchange configures an RFC 8693 token exchange at a security
// token service: the subject token is the call's signed Toolgate-Assertion,
// and the token it issues goes to the upstream as its Authorization.
type MCPTokenExchange struct {
	// TokenURL is the STS's token endpoint: https, or http only on a
	// loopback host.
	TokenURL string `yaml:"token_url"`
	ClientID string `yaml:"client_id"`
	// ClientSecretFile holds the client secret (absolute after Load),
	// read at start; sent in the request body (client_secret_post).
	ClientSecretFile string `yaml:"client_secret_file"`
	// Audience and Resource name the upstream to the STS (absolute URIs);
	// both default to the upstream's url.
	Audience string   `yaml:"audience"`
	Resource string   `yaml:"resource"`
	Scope    []string `yaml:"scope"`
	// RequestedTokenType defaults to TokenTypeAccessToken.
	RequestedTokenType string `yaml:"requested_token_type"`
}

// Pinned reports whether the upstream's tools must match their pins.
func (u MCPUpstream) Pinned() bool { return u.Pin == nil || *u.Pin }

// MCPLockFile is where `gateway mcp pin` writes the pins of cfg.
func (c *Config) MCPLockFile() string { return filepath.Join(filepath.Dir(c.File), MCPLockFileName) }

func applyMCPDefaults(c *Config, base string) {
	for i := range c.Tools.MCP {
		u := &c.Tools.MCP[i]
		if u.Timeout == 0 {
			u.Timeout = DefaultMCPTimeout
		}
		if u.MaxConcurrent == 0 {
			u.MaxConcurrent = DefaultMCPConcurrency
		}
		if u.RefreshInterval == 0 {
			u.RefreshInterval = DefaultMCPRefresh
		}
		if u.MaxResponseBytes == 0 {
			u.MaxResponseBytes = DefaultMCPResponseBytes
		}
		if len(u.Command) > 0 && strings.ContainsRune(u.Command[0], '/') && !filepath.IsAbs(u.Command[0]) {
			u.Command[0] = filepath.Join(base, u.Command[0])
		}
		if te := u.TokenExchange; te != nil {
			if te.Audience == "" {
				te.Audience = u.URL
			}
			if te.Resource == "" {
				te.Resource = u.URL
			}
			if te.RequestedTokenType == "" {
				te.RequestedTokenType = TokenTypeAccessToken
			}
			if te.ClientSecretFile != "" && !filepath.IsAbs(te.ClientSecretFile) {
				te.ClientSecretFile = filepath.Join(base, te.ClientSecretFile)
			}
		}
	}
}

// mcpUpstreams checks tools.mcp. Tool names are known only once the
// upstreams answer: collisions among them are a start error.
func (v *validator) mcpUpstreams(c *Config) {
	seen := map[string]string{}
	for i, u := range c.Tools.MCP {
		key := fmt.Sprintf("tools.mcp[%d]", i)
		switch {
		case u.Name == "":
			v.add(key+".name", "required")
		case !tools.ValidNameOf(u.Name, maxMCPNamespaceBytes):
			v.add(key+".name", "invalid namespace %q: use 1 to %d bytes of lower-case letters and digits, separated by single '-'", u.Name, maxMCPNamespaceBytes)
		default:
			if first, dup := seen[u.Name]; dup {
				v.add(key+".name", "duplicate MCP upstream %q (also %s)", u.Name, first)
			} else {
				seen[u.Name] = key
			}
		}
		switch {
		case u.URL == "" && len(u.Command) == 0:
			v.add(key, "needs url (streamable HTTP) or command (stdio)")
		case u.URL != "" && len(u.Command) > 0:
			v.add(key, "url and command exclude each other")
		case u.URL != "":
			if p, err := url.Parse(u.URL); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
				v.add(key+".url", "must be an absolute http or https URL")
			} else if p.User != nil {
				v.add(key+".url", "must not carry credentials (user:password@); use headers")
			} else if p.Fragment != "" {
				v.add(key+".url", "must not have a fragment")
			}
			if u.Network {
				v.add(key+".network", "only for command (stdio) upstreams")
			}
		default:
			if u.Command[0] == "" {
				v.add(key+".command[0]", "must name a program")
			}
			for j, a := range u.Command {
				if strings.ContainsRune(a, 0) {
					v.add(fmt.Sprintf("%s.command[%d]", key, j), "must not contain NUL")
				}
			}
			if len(u.Headers) > 0 {
				v.add(key+".headers", "only for url (streamable HTTP) upstreams")
			}
		}
		for _, h := range sortedKeys(u.Headers) {
			hk := joinKey(key+".headers", h)
			switch strings.ToLower(h) {
			case "toolgate-assertion", "mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name", "last-event-id",
				"content-type", "accept", "host", "content-length":
				v.add(hk, "is set by the gateway and cannot be configured")
				continue
			case "authorization":
				if u.TokenExchange != nil {
					v.add(hk, "cannot be configured together with token_exchange: the exchanged token is the upstream's Authorization")
					continue
				}
			}
			if !validHeaderName(h) || strings.ContainsAny(u.Headers[h], "\r\n\x00") {
				v.add(hk, "invalid header name or value")
			}
		}
		if u.Timeout <= 0 {
			v.add(key+".timeout", "must be positive, got %s", u.Timeout)
		}
		if u.MaxConcurrent <= 0 {
			v.add(key+".max_concurrent", "must be positive, got %d", u.MaxConcurrent)
		}
		if u.RefreshInterval < MinMCPRefresh {
			v.add(key+".refresh_interval", "must be at least %s, got %s", MinMCPRefresh, u.RefreshInterval)
		}
		if u.MaxResponseBytes <= 0 {
			v.add(key+".max_response_bytes", "must be positive, got %d", u.MaxResponseBytes)
		}
		for j, t := range u.Tools {
			if strings.TrimSpace(t) == "" {
				v.add(fmt.Sprintf("%s.tools[%d]", key, j), "must name an upstream tool")
			}
		}
		for _, t := range sortedKeys(u.Resources) {
			v.resources(joinKey(key+".resources", t), u.Resources[t], nil)
		}
		if u.TokenExchange != nil {
			if u.URL == "" {
				v.add(key+".token_exchange", "only for url (streamable HTTP) upstreams: a stdio server gets no HTTP request to carry a token")
			} else {
				v.tokenExchange(key+".token_exchange", u.TokenExchange)
			}
		}
	}
	if len(c.Tools.MCP) > 0 && c.Auth.Assertion.SigningKeyFile == "" {
		v.add("auth.assertion.signing_key_file", "required when tools.mcp declares upstreams (e.g. var/assertion-key.pem, created on first start)")
	}
}

func validHeaderName(h string) bool {
	if h == "" {
		return false
	}
	for _, r := range h {
		if r > 0x7e || r <= ' ' || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r) {
			return false
		}
	}
	return http.CanonicalHeaderKey(h) != ""
}
