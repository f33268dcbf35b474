package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const mcpYAML = `  mcp:
    - name: notes
      url: http://127.0.0.1:8082/mcp
      headers: {X-Api-Key: k-1}
      resources:
        search_notes:
          - {type: topic, words: /query}
    - name: files
      command: [bin/files-server, --stdio]
      pin: false
      tools: [list]
`

func mcpConfig(old, new string) string {
	y := goodYAML + mcpYAML
	if !strings.Contains(y, old) {
		panic("fixture text not found: " + old)
	}
	return withAssertion(strings.Replace(y, old, new, 1))
}

func TestMCPUpstreamsLoadWithDefaults(t *testing.T) {
	dir, file := fixture(t, mcpConfig("", ""))
	cfg, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	n, f := cfg.Tools.MCP[0], cfg.Tools.MCP[1]
	if n.Timeout != DefaultMCPTimeout || n.MaxConcurrent != DefaultMCPConcurrency || n.RefreshInterval != 60*time.Second ||
		n.MaxResponseBytes != DefaultMCPResponseBytes || !n.Pinned() || n.Headers["X-Api-Key"] != "k-1" ||
		n.Resources["search_notes"][0]["words"] != "/query" {
		t.Fatalf("notes: %+v", n)
	}
	if f.Pinned() || f.Command[0] != filepath.Join(dir, "bin/files-server") || f.Command[1] != "--stdio" || f.Tools[0] != "list" {
		t.Fatalf("files: %+v", f)
	}
	if cfg.MCPLockFile() != filepath.Join(dir, "mcp.lock.json") {
		t.Fatalf("lock file %s", cfg.MCPLockFile())
	}
}

func TestMCPUpstreamErrorsNameTheKey(t *testing.T) {
	tests := []struct{ name, yaml, key, problem string }{
		{"no name", mcpConfig("    - name: notes\n      url", "    - url"), "tools.mcp[0].name", "required"},
		{"bad namespace", mcpConfig("name: notes", "name: Notes_1"), "tools.mcp[0].name", "invalid namespace"},
		{"duplicate namespace", mcpConfig("name: files", "name: notes"), "tools.mcp[1].name", "duplicate MCP upstream"},
		{"url and command", mcpConfig("      url: http://127.0.0.1:8082/mcp\n", "      url: http://127.0.0.1:8082/mcp\n      command: [x]\n"), "tools.mcp[0]", "exclude each other"},
		{"neither", mcpConfig("      url: http://127.0.0.1:8082/mcp\n      headers: {X-Api-Key: k-1}\n", ""), "tools.mcp[0]", "needs url"},
		{"not http", mcpConfig("http://127.0.0.1:8082/mcp", "file:///etc/passwd"), "tools.mcp[0].url", "http or https"},
		{"credentials in url", mcpConfig("http://127.0.0.1", "http://u:p@127.0.0.1"), "tools.mcp[0].url", "credentials"},
		{"reserved header", mcpConfig("X-Api-Key: k-1", "Toolgate-Assertion: forged"), "tools.mcp[0].headers.Toolgate-Assertion", "set by the gateway"},
		{"header injection", mcpConfig("X-Api-Key: k-1", "X-Api-Key: \"a\\r\\nHost: evil\""), "tools.mcp[0].headers.X-Api-Key", "invalid header"},
		{"headers on stdio", mcpConfig("      pin: false\n", "      pin: false\n      headers: {A: b}\n"), "tools.mcp[1].headers", "only for url"},
		{"refresh too often", mcpConfig("      pin: false\n", "      pin: false\n      refresh_interval: 10ms\n"), "tools.mcp[1].refresh_interval", "at least"},
		{"bad resource pointer", mcpConfig("words: /query", "words: query"), "tools.mcp[0].resources.search_notes[0].words", "JSON pointer"},
		{"no signing key", strings.Replace(mcpConfig("", ""), "  assertion:\n    signing_key_file: var/assertion-key.pem\n", "", 1),
			"auth.assertion.signing_key_file", "tools.mcp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, file := fixture(t, tt.yaml)
			_, err := Load(file)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, e := range configErrors(t, err) {
				if e.Key == tt.key && strings.Contains(e.Problem, tt.problem) {
					return
				}
			}
			t.Fatalf("no error for %s containing %q in:\n%v", tt.key, tt.problem, err)
		})
	}
}

func TestMCPFrontDoorConfig(t *testing.T) {
	for _, c := range []struct {
		name, yaml, problem string
	}{
		{"default on", "", ""},
		{"off", "mcp:\n  enabled: false\n", ""},
		{"resource", "mcp:\n  resource: https://gw.example.com/mcp\n", ""},
		{"resource with credentials", "mcp:\n  resource: https://u:p@gw.example.com/mcp\n", "mcp.resource"},
		{"relative resource", "mcp:\n  resource: /mcp\n", "mcp.resource"},
		{"origins", "mcp:\n  allowed_origins: [https://console.example.com, http://localhost:3000]\n", ""},
		{"wildcard origin", "mcp:\n  allowed_origins: [\"https://*.example.com\"]\n", "mcp.allowed_origins"},
		{"origin with path", "mcp:\n  allowed_origins: [https://console.example.com/app]\n", "mcp.allowed_origins"},
		{"unknown key", "mcp:\n  enable: false\n", "mcp.enable"},
		{"session timeout", "mcp:\n  session_timeout: 5m\n", ""},
		{"tiny session timeout", "mcp:\n  session_timeout: 1ms\n", "mcp.session_timeout"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			f := filepath.Join(dir, "gateway.yaml")
			if err := os.Mkdir(filepath.Join(dir, "ws"), 0o755); err != nil {
				t.Fatal(err)
			}
			body := "policy: {dir: .}\nauth: {jwt: {hs256_secret_file: s}}\ntenants: {acme: {workspace: ws}}\n" + c.yaml
			if err := os.WriteFile(f, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(f)
			switch {
			case c.problem == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.problem != "" && (err == nil || !strings.Contains(err.Error(), c.problem)):
				t.Fatalf("error %v, want one about %s", err, c.problem)
			case c.problem == "" && cfg.MCP.On() == strings.Contains(c.yaml, "enabled: false"):
				t.Fatalf("On() = %v", cfg.MCP.On())
			}
		})
	}
}
