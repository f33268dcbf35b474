package config

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/keyfile"
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
	// RequestStateKeyFile holds the key (at least MinRequestStateKeyBytes
	// after trailing line breaks; a regular file no group or other may
	// access) that seals the requestState of input_required results, so
	// replicas sharing the file open each other's states and a restart
	// keeps them valid. Created (32 random bytes, hex, mode 0600) on first
	// start if missing. Default (absolute after Load):
	// DefaultRequestStateKeyName beside audit.signing_key_file.
	RequestStateKeyFile string `yaml:"request_state_key_file"`
	// RequestStatePreviousKeyFiles hold keys from before a rotation: they
	// open the states they sealed (until those expire) but seal none. They
	// must exist; the same checks as RequestStateKeyFile.
	RequestStatePreviousKeyFiles []string `yaml:"request_state_previous_key_files"`
}

// DefaultRequestStateKeyName is the file name of the default
// mcp.request_state_key_file, beside audit.signing_key_file.
const DefaultRequestStateKeyName = "mcp-request-state.key"

// MinRequestStateKeyBytes is the shortest requestState key accepted
// (mcpserver.MinStateKeyBytes).
const MinRequestStateKeyBytes = 32

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
	if m.On() {
		// Missing is fine: the gateway creates it on first start.
		if p := stateKeyFileProblem(m.RequestStateKeyFile, false); p != "" {
			v.add("mcp.request_state_key_file", "%s", p)
		}
		for i, f := range m.RequestStatePreviousKeyFiles {
			if f == m.RequestStateKeyFile {
				v.add("mcp.request_state_previous_key_files", "entry %d: %s is mcp.request_state_key_file itself", i, f)
			} else if p := stateKeyFileProblem(f, true); p != "" {
				v.add("mcp.request_state_previous_key_files", "entry %d: %s", i, p)
			}
		}
	}
	for i, o := range m.AllowedOrigins {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.User != nil || u.RawQuery != "" || strings.Contains(o, "*") {
			v.add("mcp.allowed_origins", "entry %d: %q is not an origin (scheme://host[:port], no wildcard)", i, o)
		}
	}
}

// stateKeyFileProblem is what is wrong with a requestState key file, or
// "": not a regular file, readable by group or others, or too short. A
// missing file is a problem only when it must exist. The key never
// appears in the problem.
func stateKeyFileProblem(path string, mustExist bool) string {
	if path == "" {
		return ""
	}
	data, err := keyfile.Read(path, 4<<10)
	var unfit *keyfile.Error
	switch {
	case os.IsNotExist(err) && !mustExist:
		return ""
	case errors.As(err, &unfit):
		return unfit.Error()
	case err != nil:
		return fmt.Sprintf("%s: %s", path, pathErrReason(err))
	}
	if n := len(bytes.TrimRight(data, "\r\n")); n < MinRequestStateKeyBytes {
		return fmt.Sprintf("%s holds %d bytes, need at least %d random bytes (e.g. openssl rand -hex 32 > FILE)", path, n, MinRequestStateKeyBytes)
	}
	return ""
}
