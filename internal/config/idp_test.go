package config

import (
	"strings"
	"testing"
	"time"
)

// withJWT puts lines (indented four spaces) under auth.jwt of goodYAML.
func withJWT(lines string) string {
	const anchor = "    hs256_secret_file: var/dev-jwt-secret\n"
	if !strings.Contains(goodYAML, anchor) {
		panic("fixture text not found")
	}
	return strings.Replace(goodYAML, anchor, anchor+lines, 1)
}

func TestLoadRejectsBadIdentityProviders(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		line    int
		key     string
		problem string
	}{
		{"oidc_issuer and jwks_url together",
			withJWT("    jwks_url: https://idp.example/keys\n    oidc_issuer: https://idp.example\n"),
			11, "auth.jwt.oidc_issuer", "set only one of auth.jwt.jwks_file, auth.jwt.jwks_url and auth.jwt.oidc_issuer (auth.jwt.jwks_url is set too)"},
		{"jwks_file and jwks_url together",
			withJWT("    jwks_url: https://idp.example/keys\n    jwks_file: var/dev-jwt-secret\n"),
			10, "auth.jwt.jwks_url", "(auth.jwt.jwks_file is set too)"},
		{"plain http issuer off loopback",
			withJWT("    oidc_issuer: http://idp.example\n"), 10, "auth.jwt.oidc_issuer", "must use https"},
		{"plain http key set off loopback",
			withJWT("    jwks_url: http://10.0.0.8/keys\n"), 10, "auth.jwt.jwks_url", "must use https"},
		{"key set URL that is a file name",
			withJWT("    jwks_url: keys.json\n"), 10, "auth.jwt.jwks_url", `must be an absolute https URL, got "keys.json"`},
		{"key set URL of another scheme",
			withJWT("    jwks_url: ftp://idp.example/keys\n"), 10, "auth.jwt.jwks_url", "must be an absolute https URL"},
		{"issuer with credentials",
			withJWT("    oidc_issuer: https://u:p@idp.example\n"), 10, "auth.jwt.oidc_issuer", "must not carry credentials"},
		{"issuer with a query",
			withJWT("    oidc_issuer: https://idp.example/?realm=a\n"), 10, "auth.jwt.oidc_issuer", "must not have a query"},
		{"issuer with a fragment",
			withJWT("    oidc_issuer: https://idp.example/#a\n"), 10, "auth.jwt.oidc_issuer", "must not have a fragment"},
		{"issuer that differs from oidc_issuer",
			withJWT("    oidc_issuer: https://idp.example\n    issuer: https://other.example\n"),
			11, "auth.jwt.issuer", `must equal auth.jwt.oidc_issuer ("https://idp.example") or be left out`},
		{"refresh below a second",
			withJWT("    oidc_issuer: https://idp.example\n    jwks_refresh: 100ms\n"),
			11, "auth.jwt.jwks_refresh", "must be at least 1s, got 100ms"},
		{"unknown-kid refresh of zero",
			withJWT("    jwks_url: https://idp.example/keys\n    jwks_unknown_kid_refresh: 0s\n"),
			11, "auth.jwt.jwks_unknown_kid_refresh", "must be at least 1s, got 0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, file := fixture(t, tt.yaml)
			cfg, err := Load(file)
			if err == nil {
				t.Fatalf("Load succeeded: %+v", cfg.Auth.JWT)
			}
			for _, ce := range configErrors(t, err) {
				if ce.Key == tt.key && strings.Contains(ce.Problem, tt.problem) {
					if ce.Line != tt.line {
						t.Errorf("line = %d, want %d (%v)", ce.Line, tt.line, ce)
					}
					return
				}
			}
			t.Errorf("no error with key %q and problem containing %q; got:\n%v", tt.key, tt.problem, err)
		})
	}
}

func TestLoadAcceptsIdentityProviders(t *testing.T) {
	for _, tt := range []struct {
		name, lines string
		check       func(t *testing.T, j JWT)
	}{
		{"https issuer with the defaults", "    oidc_issuer: https://idp.example/realms/acme\n", func(t *testing.T, j JWT) {
			if j.OIDCIssuer != "https://idp.example/realms/acme" || j.JWKSRefresh != 5*time.Minute || j.JWKSUnknownKIDRefresh != 10*time.Second {
				t.Errorf("jwt = %+v", j)
			}
		}},
		{"plain http on loopback (tests)", "    jwks_url: http://127.0.0.1:8181/keys\n    jwks_refresh: 1m\n    jwks_unknown_kid_refresh: 30s\n", func(t *testing.T, j JWT) {
			if j.JWKSURL != "http://127.0.0.1:8181/keys" || j.JWKSRefresh != time.Minute || j.JWKSUnknownKIDRefresh != 30*time.Second {
				t.Errorf("jwt = %+v", j)
			}
		}},
		{"localhost and ::1 are loopback", "    oidc_issuer: http://localhost:8181\n", nil},
		{"the issuer may repeat oidc_issuer", "    oidc_issuer: http://[::1]:8181\n    issuer: http://[::1]:8181\n", nil},
		{"an IdP alone is a credential", "", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			yaml := withJWT(tt.lines)
			if tt.lines == "" {
				// Only the IdP: no HS256 secret and no API keys.
				yaml = strings.Replace(goodYAML, "    hs256_secret_file: var/dev-jwt-secret\n", "    oidc_issuer: https://idp.example\n", 1)
				yaml = yaml[:strings.Index(yaml, "  api_keys:")] + yaml[strings.Index(yaml, "tenants:"):]
			}
			_, file := fixture(t, yaml)
			cfg, err := Load(file)
			if err != nil {
				t.Fatal(err)
			}
			if tt.check != nil {
				tt.check(t, cfg.Auth.JWT)
			}
		})
	}
}
