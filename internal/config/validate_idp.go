package config

import (
	"net"
	"net/url"
	"strings"
	"time"
)

// identityProvider checks the keys that verify JWTs from an identity
// provider: one source of asymmetric keys, URLs that keys can be trusted
// from, and refresh intervals that cannot hammer the provider.
func (v *validator) identityProvider(j JWT) {
	var sources []string
	for _, s := range []struct{ key, val string }{
		{"auth.jwt.jwks_file", j.JWKSFile},
		{"auth.jwt.jwks_url", j.JWKSURL},
		{"auth.jwt.oidc_issuer", j.OIDCIssuer},
	} {
		if s.val == "" {
			continue
		}
		if len(sources) > 0 {
			v.add(s.key, "set only one of auth.jwt.jwks_file, auth.jwt.jwks_url and auth.jwt.oidc_issuer (%s is set too)", sources[0])
		}
		sources = append(sources, s.key)
	}
	if j.JWKSURL != "" {
		v.keyURL("auth.jwt.jwks_url", j.JWKSURL)
	}
	if j.OIDCIssuer != "" {
		if v.keyURL("auth.jwt.oidc_issuer", j.OIDCIssuer) {
			// OpenID Connect Discovery 1.0 §3: the issuer is a URL with no
			// query or fragment.
			if u, _ := url.Parse(j.OIDCIssuer); u.RawQuery != "" || u.ForceQuery {
				v.add("auth.jwt.oidc_issuer", "must not have a query")
			}
		}
		if j.Issuer != "" && j.Issuer != j.OIDCIssuer {
			v.add("auth.jwt.issuer", "must equal auth.jwt.oidc_issuer (%q) or be left out: tokens must carry the issuer the discovery document names", j.OIDCIssuer)
		}
	}
	if j.JWKSURL != "" || j.OIDCIssuer != "" {
		if j.JWKSRefresh < time.Second {
			v.add("auth.jwt.jwks_refresh", "must be at least 1s, got %s", j.JWKSRefresh)
		}
		if j.JWKSUnknownKIDRefresh < time.Second {
			v.add("auth.jwt.jwks_unknown_kid_refresh", "must be at least 1s, got %s", j.JWKSUnknownKIDRefresh)
		}
	}
}

// keyURL checks a URL that verification keys are fetched from: https, or
// http only on a loopback host (keys fetched in the clear could be
// swapped by anyone on the path); a host; no credentials; no fragment.
// It reports whether the URL is usable.
func (v *validator) keyURL(key, raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		v.add(key, "must be an absolute https URL, got %q", raw)
		return false
	}
	ok := true
	if u.Scheme == "http" && !IsLoopbackHost(u.Hostname()) {
		v.add(key, "must use https: keys fetched over plain http could be replaced on the way (http is allowed only on a loopback host, for tests)")
		ok = false
	}
	if u.User != nil {
		v.add(key, "must not carry credentials (user:password@)")
		ok = false
	}
	if u.Fragment != "" || strings.HasSuffix(raw, "#") {
		v.add(key, "must not have a fragment")
		ok = false
	}
	return ok
}

// IsLoopbackHost reports whether host (a URL's host name, without port or
// brackets) is localhost or a loopback address.
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
