package config

import (
	"net/url"
	"os"
	"strings"
	"time"
)

// Console configures the web console served at /console: sign-in with a
// bearer token always, and with the identity provider (OIDC authorization
// code flow with PKCE) when auth.jwt.oidc_issuer and console.client_id
// are set.
type Console struct {
	// Enabled (default true) serves /console; false answers it 404.
	Enabled *bool `yaml:"enabled"`
	// PublicURL is the console's address as browsers reach it (behind a
	// proxy, https://gateway.example.com/console/): its origin is the only
	// one whose forms are accepted, and an https URL makes the session
	// cookie Secure. Default: the request's own Host (Secure only over
	// TLS).
	PublicURL string `yaml:"public_url"`
	// ClientID is the console's OAuth client at the OIDC issuer; set, the
	// sign-in page offers "Sign in with the identity provider".
	ClientID string `yaml:"client_id"`
	// ClientSecretFile holds the client's secret, for confidential
	// clients ("" for a public client: PKCE alone).
	ClientSecretFile string `yaml:"client_secret_file"`
	// RedirectURL is the exact redirect URI registered with the issuer:
	// <public URL>/console/oidc/callback. Required with client_id.
	RedirectURL string `yaml:"redirect_url"`
	// Scopes requested at the issuer (default openid, profile, email).
	Scopes []string `yaml:"scopes"`
	// SessionTTL bounds a session's life (default 8h); a session never
	// outlives the credential it was opened with.
	SessionTTL time.Duration `yaml:"session_ttl"`
	// IdleTimeout ends a session unused for this long (default 30m).
	IdleTimeout time.Duration `yaml:"idle_timeout"`
}

// On reports whether /console is served.
func (c Console) On() bool { return c.Enabled == nil || *c.Enabled }

func (v *validator) console(c *Config) {
	k := c.Console
	if k.SessionTTL < 0 || (k.SessionTTL > 0 && k.SessionTTL < time.Minute) {
		v.add("console.session_ttl", "must be at least 1m (default 8h)")
	}
	if k.IdleTimeout < 0 || (k.IdleTimeout > 0 && k.IdleTimeout < time.Minute) {
		v.add("console.idle_timeout", "must be at least 1m (default 30m)")
	}
	var public *url.URL
	if k.PublicURL != "" {
		u, err := url.Parse(k.PublicURL)
		if err != nil || !plainAbsoluteURL(k.PublicURL, u) {
			v.add("console.public_url", "must be an absolute http(s) URL without credentials, query or fragment (where browsers reach /console/)")
		} else {
			public = u
		}
	}
	if k.ClientID == "" {
		if k.RedirectURL != "" || k.ClientSecretFile != "" || len(k.Scopes) > 0 {
			v.add("console.client_id", "required when console.redirect_url, client_secret_file or scopes is set")
		}
		return
	}
	j := c.Auth.JWT
	if j.OIDCIssuer == "" {
		v.add("console.client_id", "needs auth.jwt.oidc_issuer (the issuer the console signs in with)")
	}
	switch {
	case j.Audience == "":
		v.add("console.client_id", "needs auth.jwt.audience: the console opens sessions with access tokens the provider issues for this gateway, "+
			"and without an audience any token of the issuer would be accepted")
	case j.Audience == k.ClientID:
		v.add("console.client_id", "must differ from auth.jwt.audience (%q): the ID tokens the provider issues to the console carry its client_id as audience, "+
			"and would be accepted as API credentials", j.Audience)
	}
	u, err := url.Parse(k.RedirectURL)
	switch {
	case k.RedirectURL == "":
		v.add("console.redirect_url", "required with console.client_id: the exact redirect URI registered at the issuer, e.g. https://gateway.example.com/console/oidc/callback")
	case err != nil || !plainAbsoluteURL(k.RedirectURL, u):
		v.add("console.redirect_url", "must be an absolute http(s) URL without credentials, query or fragment")
	case u.Path != "/console/oidc/callback":
		v.add("console.redirect_url", "must have the path /console/oidc/callback (the console's callback route), got path %q", u.Path)
	case u.Scheme == "http" && !IsLoopbackHost(u.Hostname()):
		v.add("console.redirect_url", "must be https unless its host is loopback")
	case public != nil && origin(u) != origin(public):
		v.add("console.redirect_url", "must be on the origin of console.public_url (%s): the browser comes back there with the cookie the sign-in started with", origin(public))
	}
	if k.ClientSecretFile != "" {
		if fi, err := os.Stat(k.ClientSecretFile); err != nil {
			v.add("console.client_secret_file", "cannot be read: %v", err)
		} else if !fi.Mode().IsRegular() {
			v.add("console.client_secret_file", "%s is not a regular file", k.ClientSecretFile)
		}
	}
	for i, s := range k.Scopes {
		switch {
		case s == "" || len(s) > 200:
			v.add("console.scopes", "entry %d is empty or too long", i)
		case !scopeToken(s):
			v.add("console.scopes", "entry %d (%q) is not a scope: one word of printable ASCII without spaces, quotes or backslashes", i, s)
		}
	}
}

// plainAbsoluteURL reports whether u (parsed from raw) is an absolute
// http(s) URL without credentials, query or fragment (not even an empty
// "?" or "#").
func plainAbsoluteURL(raw string, u *url.URL) bool {
	return (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && u.User == nil &&
		u.RawQuery == "" && !u.ForceQuery && u.Fragment == "" && !strings.Contains(raw, "#")
}

// origin is u's scheme://host[:port], lower case, without a default port.
func origin(u *url.URL) string {
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host
}

// scopeToken reports whether s is an RFC 6749 §3.3 scope-token:
// 1*( %x21 / %x23-5B / %x5D-7E ).
func scopeToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return s != ""
}
