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
		{"doubled hyphen in namespace", mcpConfig("name: notes", "name: no--tes"), "tools.mcp[0].name", "invalid namespace"},
		{"namespace too long", mcpConfig("name: notes", "name: "+strings.Repeat("n", 33)), "tools.mcp[0].name", "invalid namespace"},
		{"duplicate namespace", mcpConfig("name: files", "name: notes"), "tools.mcp[1].name", "duplicate MCP upstream"},
		{"url and command", mcpConfig("      url: http://127.0.0.1:8082/mcp\n", "      url: http://127.0.0.1:8082/mcp\n      command: [x]\n"), "tools.mcp[0]", "exclude each other"},
		{"neither", mcpConfig("      url: http://127.0.0.1:8082/mcp\n      headers: {X-Api-Key: k-1}\n", ""), "tools.mcp[0]", "needs url"},
		{"not http", mcpConfig("http://127.0.0.1:8082/mcp", "file:///etc/passwd"), "tools.mcp[0].url", "http or https"},
		{"credentials in url", mcpConfig("http://127.0.0.1", "http://u:p@127.0.0.1"), "tools.mcp[0].url", "credentials"},
		{"reserved header", mcpConfig("X-Api-Key: k-1", "Toolgate-Assertion: forged"), "tools.mcp[0].headers.Toolgate-Assertion", "set by the gateway"},
		{"reserved MCP header", mcpConfig("X-Api-Key: k-1", "Mcp-Method: tools/list"), "tools.mcp[0].headers.Mcp-Method", "set by the gateway"},
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

// exchangeConfig is mcpYAML with a token exchange on the notes upstream
// (old replaced by new in it) and the client secret file in place.
func exchangeConfig(t *testing.T, old, new string) (dir, file string) {
	t.Helper()
	block := "      headers: {X-Api-Key: k-1}\n" +
		"      token_exchange:\n" +
		"        token_url: https://sts.example.com/token\n" +
		"        client_id: toolgate\n" +
		"        client_secret_file: var/sts-secret\n" +
		"        scope: [notes.read, notes.write]\n"
	y := mcpConfig("      headers: {X-Api-Key: k-1}\n", block)
	if !strings.Contains(y, old) {
		t.Fatalf("fixture text not found: %q", old)
	}
	dir, file = fixture(t, strings.Replace(y, old, new, 1))
	if err := os.MkdirAll(filepath.Join(dir, "var"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "var", "sts-secret"), []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

func TestMCPTokenExchangeLoadsWithDefaults(t *testing.T) {
	dir, file := exchangeConfig(t, "", "")
	cfg, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	te := cfg.Tools.MCP[0].TokenExchange
	if te == nil || te.TokenURL != "https://sts.example.com/token" || te.ClientID != "toolgate" ||
		te.ClientSecretFile != filepath.Join(dir, "var", "sts-secret") ||
		te.Audience != "http://127.0.0.1:8082/mcp" || te.Resource != "http://127.0.0.1:8082/mcp" ||
		te.RequestedTokenType != TokenTypeAccessToken || strings.Join(te.Scope, " ") != "notes.read notes.write" {
		t.Fatalf("token_exchange = %+v", te)
	}
	if cfg.Tools.MCP[1].TokenExchange != nil {
		t.Fatal("the stdio upstream got a token exchange")
	}

	// Explicit values stay; an STS on loopback may use http (tests).
	_, file = exchangeConfig(t, "        scope: [notes.read, notes.write]\n",
		"        audience: urn:example:notes\n        resource: https://notes.example.com/mcp\n"+
			"        requested_token_type: urn:ietf:params:oauth:token-type:jwt\n")
	y, _ := os.ReadFile(file)
	os.WriteFile(file, []byte(strings.Replace(string(y), "https://sts.example.com/token", "http://127.0.0.1:9/token", 1)), 0o600)
	cfg, err = Load(file)
	if err != nil {
		t.Fatal(err)
	}
	te = cfg.Tools.MCP[0].TokenExchange
	if te.Audience != "urn:example:notes" || te.Resource != "https://notes.example.com/mcp" || te.RequestedTokenType != TokenTypeJWT || te.Scope != nil {
		t.Fatalf("token_exchange = %+v", te)
	}
}

func TestMCPTokenExchangeErrorsNameTheKey(t *testing.T) {
	const k = "tools.mcp[0].token_exchange"
	tests := []struct{ name, old, new, key, problem string }{
		{"on a stdio upstream", "      pin: false\n", "      pin: false\n      token_exchange: {token_url: https://sts.example.com/token}\n",
			"tools.mcp[1].token_exchange", "only for url"},
		{"authorization header too", "X-Api-Key: k-1", "Authorization: Bearer k-1", "tools.mcp[0].headers.Authorization", "together with token_exchange"},
		{"authorization header in another case", "X-Api-Key: k-1", "authorization: Bearer k-1", "tools.mcp[0].headers.authorization", "together with token_exchange"},
		{"no token url", "        token_url: https://sts.example.com/token\n", "", k + ".token_url", "required"},
		{"relative token url", "https://sts.example.com/token", "/token", k + ".token_url", "absolute https URL"},
		{"token url not http", "https://sts.example.com/token", "ftp://sts.example.com/token", k + ".token_url", "absolute https URL"},
		{"plain http elsewhere", "https://sts.example.com/token", "http://sts.example.com/token", k + ".token_url", "must use https"},
		{"credentials in token url", "https://sts.example.com/token", "https://u:p@sts.example.com/token", k + ".token_url", "credentials"},
		{"fragment in token url", "https://sts.example.com/token", "https://sts.example.com/token#x", k + ".token_url", "fragment"},
		{"no client id", "        client_id: toolgate\n", "", k + ".client_id", "required"},
		{"client id with a control character", "client_id: toolgate", `client_id: "tool\tgate"`, k + ".client_id", "printable"},
		{"no client secret file", "        client_secret_file: var/sts-secret\n", "", k + ".client_secret_file", "required"},
		{"missing client secret file", "var/sts-secret", "var/nope", k + ".client_secret_file", "no such file"},
		{"client secret file is a folder", "var/sts-secret", "policies", k + ".client_secret_file", "not a regular file"},
		{"inline client secret", "        client_secret_file: var/sts-secret\n", "        client_secret: s3cret\n", k + ".client_secret", "unknown key"},
		{"audience not a URI", "        client_id: toolgate\n", "        client_id: toolgate\n        audience: notes\n", k + ".audience", "absolute URI"},
		{"audience javascript", "        client_id: toolgate\n", "        client_id: toolgate\n        audience: \"javascript:alert(1)\"\n", k + ".audience", "must not use"},
		{"resource with a fragment", "        client_id: toolgate\n", "        client_id: toolgate\n        resource: https://notes.example.com/mcp#a\n", k + ".resource", "fragment"},
		{"resource with a space", "        client_id: toolgate\n", "        client_id: toolgate\n        resource: \"https://notes.example.com/a b\"\n", k + ".resource", "absolute URI"},
		{"scope with a space", "[notes.read, notes.write]", "[\"notes.read notes.write\"]", k + ".scope[0]", "invalid scope"},
		{"empty scope", "[notes.read, notes.write]", "[notes.read, \"\"]", k + ".scope[1]", "invalid scope"},
		{"token type not a URI", "        client_id: toolgate\n", "        client_id: toolgate\n        requested_token_type: access_token\n", k + ".requested_token_type", "absolute URI"},
		{"not a mapping", "      token_exchange:\n", "      token_exchange: yes\n      x:\n", k, "expected a mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, file := exchangeConfig(t, tt.old, tt.new)
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

func TestMCPTokenExchangeEmptySecretFileIsAnError(t *testing.T) {
	dir, file := exchangeConfig(t, "", "")
	if err := os.WriteFile(filepath.Join(dir, "var", "sts-secret"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(file)
	if err == nil || !strings.Contains(err.Error(), "tools.mcp[0].token_exchange.client_secret_file") || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("error = %v", err)
	}
	// The secret never appears in an error.
	os.WriteFile(filepath.Join(dir, "var", "sts-secret"), []byte("s3cret"), 0o600)
	y, _ := os.ReadFile(file)
	os.WriteFile(file, []byte(strings.Replace(string(y), "client_id: toolgate", "client_id: \"\"", 1)), 0o600)
	if _, err := Load(file); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("error = %v", err)
	}
}

// mcp.request_state_key_file defaults to a file beside the checkpoint
// key; relative paths follow the config file.
func TestMCPRequestStateKeyFileDefaultsBesideTheCheckpointKey(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       func(dir string) string
	}{
		{"sqlite", "", func(dir string) string { return filepath.Join(dir, "audit-dir", DefaultRequestStateKeyName) }},
		{"explicit checkpoint key", "audit: {driver: sqlite, dsn: audit-dir/audit.db, signing_key_file: keys/audit.key}\n",
			func(dir string) string { return filepath.Join(dir, "keys", DefaultRequestStateKeyName) }},
		{"explicit", "mcp: {request_state_key_file: secrets/state.key}\n", func(dir string) string { return filepath.Join(dir, "secrets", "state.key") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			must(t, os.Mkdir(filepath.Join(dir, "ws"), 0o755))
			audit := "audit: {driver: sqlite, dsn: audit-dir/audit.db}\n"
			if strings.HasPrefix(c.yaml, "audit:") {
				audit = ""
			}
			body := "policy: {dir: .}\nauth: {jwt: {hs256_secret_file: s}}\ntenants: {acme: {workspace: ws}}\n" + audit + c.yaml
			f := filepath.Join(dir, "gateway.yaml")
			must(t, os.WriteFile(f, []byte(body), 0o644))
			cfg, err := Load(f)
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.MCP.RequestStateKeyFile; got != c.want(dir) {
				t.Fatalf("mcp.request_state_key_file = %q, want %q", got, c.want(dir))
			}
		})
	}
}

// A requestState key file that exists must be a regular file, private
// and long enough; previous key files must exist too. Each problem names
// its key, and never shows the key.
func TestMCPRequestStateKeyFileErrorsNameTheKey(t *testing.T) {
	good := strings.Repeat("0123456789abcdef", 4) + "\n"
	for _, c := range []struct {
		name    string
		files   map[string]string // name → content; mode 0600 unless modes says
		modes   map[string]os.FileMode
		yaml    string
		problem string // "" when it loads
	}{
		{"missing: created on first start", nil, nil, "mcp: {request_state_key_file: state.key}\n", ""},
		{"good", map[string]string{"state.key": good}, nil, "mcp: {request_state_key_file: state.key}\n", ""},
		{"mode 0400", map[string]string{"state.key": good}, map[string]os.FileMode{"state.key": 0o400}, "mcp: {request_state_key_file: state.key}\n", ""},
		{"short", map[string]string{"state.key": "REPLACE-ME\n"}, nil, "mcp: {request_state_key_file: state.key}\n",
			"mcp.request_state_key_file: " + "DIR/state.key holds 10 bytes, need at least 32"},
		{"empty", map[string]string{"state.key": ""}, nil, "mcp: {request_state_key_file: state.key}\n", "need at least 32"},
		{"31 bytes and line breaks", map[string]string{"state.key": strings.Repeat("k", 31) + "\r\n\n"}, nil, "mcp: {request_state_key_file: state.key}\n", "holds 31 bytes"},
		{"group-readable", map[string]string{"state.key": good}, map[string]os.FileMode{"state.key": 0o640}, "mcp: {request_state_key_file: state.key}\n",
			"mcp.request_state_key_file: DIR/state.key has mode 0640; group and others must have no access"},
		{"world-readable", map[string]string{"state.key": good}, map[string]os.FileMode{"state.key": 0o604}, "mcp: {request_state_key_file: state.key}\n", "has mode 0604"},
		{"a folder", nil, nil, "mcp: {request_state_key_file: ws}\n", "mcp.request_state_key_file: DIR/ws is not a regular file"},
		{"default path, bad file", map[string]string{DefaultRequestStateKeyName: "short"}, nil, "", "mcp.request_state_key_file: DIR/" + DefaultRequestStateKeyName + " holds 5 bytes"},
		{"off: not checked", map[string]string{"state.key": "short"}, nil, "mcp: {enabled: false, request_state_key_file: state.key}\n", ""},
		{"previous", map[string]string{"old.key": good}, nil, "mcp: {request_state_previous_key_files: [old.key]}\n", ""},
		{"previous missing", nil, nil, "mcp: {request_state_previous_key_files: [old.key]}\n",
			"mcp.request_state_previous_key_files: entry 0: DIR/old.key: no such file or directory"},
		{"previous short", map[string]string{"old.key": good, "older.key": "short"}, nil, "mcp: {request_state_previous_key_files: [old.key, older.key]}\n",
			"mcp.request_state_previous_key_files: entry 1: DIR/older.key holds 5 bytes"},
		{"previous readable", map[string]string{"old.key": good}, map[string]os.FileMode{"old.key": 0o644}, "mcp: {request_state_previous_key_files: [old.key]}\n", "entry 0: DIR/old.key has mode 0644"},
		{"previous is the current key", map[string]string{"state.key": good}, nil, "mcp: {request_state_key_file: state.key, request_state_previous_key_files: [state.key]}\n",
			"entry 0: DIR/state.key is mcp.request_state_key_file itself"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			must(t, os.Mkdir(filepath.Join(dir, "ws"), 0o755))
			for name, content := range c.files {
				p := filepath.Join(dir, name)
				must(t, os.WriteFile(p, []byte(content), 0o600))
				if m, ok := c.modes[name]; ok {
					must(t, os.Chmod(p, m))
				}
			}
			body := "policy: {dir: .}\nauth: {jwt: {hs256_secret_file: s}}\ntenants: {acme: {workspace: ws}}\naudit: {driver: sqlite, dsn: audit.db}\n" + c.yaml
			f := filepath.Join(dir, "gateway.yaml")
			must(t, os.WriteFile(f, []byte(body), 0o644))
			_, err := Load(f)
			want := strings.ReplaceAll(c.problem, "DIR", dir)
			switch {
			case c.problem == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case c.problem != "" && (err == nil || !strings.Contains(err.Error(), want)):
				t.Fatalf("error %v, want one with %q", err, want)
			case err != nil && (strings.Contains(err.Error(), "0123456789abcdef") || strings.Contains(err.Error(), "REPLACE-ME")):
				t.Fatalf("the error shows the key: %v", err)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
