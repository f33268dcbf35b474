package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// consoleYAML is goodYAML with an OpenID Connect issuer and the gateway's
// audience under auth.jwt (jwt lines replace them when given), and a
// console section of lines (indented two spaces).
func consoleYAML(jwt, lines string) string {
	if jwt == "" {
		jwt = "    oidc_issuer: https://idp.example\n    audience: toolgate\n"
	}
	return withJWT(jwt) + "console:\n" + lines
}

// lineOf is the 1-based line of the first line of yaml containing s.
func lineOf(t *testing.T, yaml, s string) int {
	t.Helper()
	for i, l := range strings.Split(yaml, "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	t.Fatalf("fixture has no line with %q", s)
	return 0
}

const oidcLines = "  client_id: toolgate-console\n  redirect_url: https://gw.example/console/oidc/callback\n"

func TestConsoleConfigErrorsNameTheKeyAndLine(t *testing.T) {
	tests := []struct {
		name    string
		jwt     string // "" : oidc_issuer and audience
		lines   string
		key     string
		at      string // the text of the line the error must name
		problem string
	}{
		// Sessions.
		{"session_ttl below a minute", "", "  session_ttl: 30s\n", "console.session_ttl", "session_ttl:", "must be at least 1m (default 8h)"},
		{"negative session_ttl", "", "  session_ttl: -1h\n", "console.session_ttl", "session_ttl:", "must be at least 1m"},
		{"idle_timeout below a minute", "", "  idle_timeout: 10s\n", "console.idle_timeout", "idle_timeout:", "must be at least 1m (default 30m)"},

		// public_url.
		{"public_url without a scheme", "", "  public_url: gw.example/console/\n", "console.public_url", "public_url:", "must be an absolute http(s) URL"},
		{"public_url of another scheme", "", "  public_url: ftp://gw.example/\n", "console.public_url", "public_url:", "must be an absolute http(s) URL"},
		{"public_url with credentials", "", "  public_url: https://u:p@gw.example/\n", "console.public_url", "public_url:", "without credentials"},
		{"public_url with a query", "", "  public_url: https://gw.example/?a=1\n", "console.public_url", "public_url:", "without credentials, query or fragment"},
		{"public_url with an empty fragment", "", "  public_url: \"https://gw.example/#\"\n", "console.public_url", "public_url:", "without credentials, query or fragment"},

		// The OIDC keys need client_id.
		{"redirect_url without client_id", "", "  redirect_url: https://gw.example/console/oidc/callback\n", "console.client_id", "console:", "required when console.redirect_url, client_secret_file or scopes is set"},
		{"client_secret_file without client_id", "", "  client_secret_file: var/dev-jwt-secret\n", "console.client_id", "console:", "required when"},
		{"scopes without client_id", "", "  scopes: [openid]\n", "console.client_id", "console:", "required when"},

		// client_id needs the issuer and the gateway's audience.
		{"client_id without oidc_issuer", "    audience: toolgate\n", oidcLines, "console.client_id", "client_id:", "needs auth.jwt.oidc_issuer"},
		{"client_id without an audience", "    oidc_issuer: https://idp.example\n", oidcLines, "console.client_id", "client_id:", "needs auth.jwt.audience"},
		{"client_id equal to the audience", "    oidc_issuer: https://idp.example\n    audience: toolgate-console\n", oidcLines, "console.client_id", "client_id:", `must differ from auth.jwt.audience ("toolgate-console")`},

		// redirect_url.
		{"client_id without redirect_url", "", "  client_id: toolgate-console\n", "console.redirect_url", "console:", "required with console.client_id"},
		{"relative redirect_url", "", "  client_id: c\n  redirect_url: /console/oidc/callback\n", "console.redirect_url", "redirect_url:", "must be an absolute http(s) URL"},
		{"redirect_url with a query", "", "  client_id: c\n  redirect_url: https://gw.example/console/oidc/callback?x=1\n", "console.redirect_url", "redirect_url:", "without credentials, query or fragment"},
		{"redirect_url with an empty query", "", "  client_id: c\n  redirect_url: https://gw.example/console/oidc/callback?\n", "console.redirect_url", "redirect_url:", "without credentials, query or fragment"},
		{"redirect_url with a fragment", "", "  client_id: c\n  redirect_url: \"https://gw.example/console/oidc/callback#x\"\n", "console.redirect_url", "redirect_url:", "without credentials, query or fragment"},
		{"redirect_url with credentials", "", "  client_id: c\n  redirect_url: https://u:p@gw.example/console/oidc/callback\n", "console.redirect_url", "redirect_url:", "without credentials"},
		{"redirect_url of another route", "", "  client_id: c\n  redirect_url: https://gw.example/oidc/callback\n", "console.redirect_url", "redirect_url:", `must have the path /console/oidc/callback (the console's callback route), got path "/oidc/callback"`},
		{"redirect_url below a prefix", "", "  client_id: c\n  redirect_url: https://gw.example/gw/console/oidc/callback\n", "console.redirect_url", "redirect_url:", "must have the path /console/oidc/callback"},
		{"redirect_url with a trailing slash", "", "  client_id: c\n  redirect_url: https://gw.example/console/oidc/callback/\n", "console.redirect_url", "redirect_url:", "must have the path /console/oidc/callback"},
		{"plain http redirect_url off loopback", "", "  client_id: c\n  redirect_url: http://gw.example/console/oidc/callback\n", "console.redirect_url", "redirect_url:", "must be https unless its host is loopback"},
		{"redirect_url on another origin than public_url", "", "  public_url: https://console.example/\n" + oidcLines, "console.redirect_url", "redirect_url:", "must be on the origin of console.public_url (https://console.example)"},
		{"redirect_url on another port than public_url", "", "  public_url: https://gw.example:8443/\n" + oidcLines, "console.redirect_url", "redirect_url:", "(https://gw.example:8443)"},

		// client_secret_file.
		{"missing client_secret_file", "", oidcLines + "  client_secret_file: var/no-such-secret\n", "console.client_secret_file", "client_secret_file:", "cannot be read"},
		{"client_secret_file that is a folder", "", oidcLines + "  client_secret_file: var\n", "console.client_secret_file", "client_secret_file:", "is not a regular file"},

		// scopes.
		{"empty scope", "", oidcLines + "  scopes: [openid, \"\"]\n", "console.scopes", "scopes:", "entry 1 is empty or too long"},
		{"scope too long", "", oidcLines + "  scopes: [" + strings.Repeat("s", 201) + "]\n", "console.scopes", "scopes:", "entry 0 is empty or too long"},
		{"scope with a space", "", oidcLines + "  scopes: [\"openid email\"]\n", "console.scopes", "scopes:", `entry 0 ("openid email") is not a scope`},
		{"scope with a quote", "", oidcLines + "  scopes: [openid, 'a\"b']\n", "console.scopes", "scopes:", "entry 1"},

		// Unknown keys are refused like everywhere else.
		{"misspelt key", "", "  client: toolgate-console\n", "console.client", "client:", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yaml := consoleYAML(tt.jwt, tt.lines)
			_, file := fixture(t, yaml)
			cfg, err := Load(file)
			if err == nil {
				t.Fatalf("Load succeeded: %+v", cfg.Console)
			}
			want := lineOf(t, yaml, tt.at)
			for _, ce := range configErrors(t, err) {
				if ce.Key == tt.key && strings.Contains(ce.Problem, tt.problem) {
					if ce.Line != want {
						t.Errorf("line = %d, want %d (%v)", ce.Line, want, ce)
					}
					return
				}
			}
			t.Errorf("no error with key %q and problem containing %q; got:\n%v", tt.key, tt.problem, err)
		})
	}
}

func TestConsoleConfigAccepts(t *testing.T) {
	t.Run("every key", func(t *testing.T) {
		yaml := consoleYAML("", `  enabled: true
  public_url: https://GW.example:443/console/
  client_id: toolgate-console
  client_secret_file: var/console-secret
  redirect_url: https://gw.example/console/oidc/callback
  scopes: [openid, email, "api://toolgate/.default"]
  session_ttl: 2h
  idle_timeout: 15m
`)
		dir, file := fixture(t, yaml)
		if err := os.MkdirAll(filepath.Join(dir, "var"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "var", "console-secret"), []byte("s3cret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(file)
		if err != nil {
			t.Fatal(err)
		}
		c := cfg.Console
		if !c.On() || c.ClientID != "toolgate-console" || c.ClientSecretFile != filepath.Join(dir, "var", "console-secret") ||
			c.RedirectURL != "https://gw.example/console/oidc/callback" || len(c.Scopes) != 3 ||
			c.SessionTTL != 2*time.Hour || c.IdleTimeout != 15*time.Minute || c.PublicURL != "https://GW.example:443/console/" {
			t.Fatalf("console = %+v", c)
		}
	})
	for _, tt := range []struct{ name, jwt, lines string }{
		{"no console section", "", ""},
		{"turned off", "", "  enabled: false\n"},
		{"token sign-in only, behind a proxy", "", "  public_url: https://gw.example/\n  session_ttl: 1m\n  idle_timeout: 1m\n"},
		{"a public client", "", oidcLines},
		{"plain http on 127.0.0.1", "", "  client_id: c\n  redirect_url: http://127.0.0.1:8080/console/oidc/callback\n  public_url: http://127.0.0.1:8080\n"},
		{"plain http on localhost", "", "  client_id: c\n  redirect_url: http://localhost:8080/console/oidc/callback\n"},
		{"plain http on ::1", "", "  client_id: c\n  redirect_url: http://[::1]:8080/console/oidc/callback\n"},
		{"default port spelled out", "", "  client_id: c\n  redirect_url: https://gw.example:443/console/oidc/callback\n  public_url: https://gw.example\n"},
		{"an audience URL", "    oidc_issuer: https://idp.example\n    audience: https://toolgate.example/\n", oidcLines},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, file := fixture(t, consoleYAML(tt.jwt, tt.lines))
			cfg, err := Load(file)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Console.On() == strings.Contains(tt.lines, "enabled: false") {
				t.Errorf("On() = %v", cfg.Console.On())
			}
		})
	}
}
