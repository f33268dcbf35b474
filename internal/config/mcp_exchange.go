package config

import (
	"fmt"
	"net/url"
	"os"
	"strings"
)

// tokenExchange checks tools.mcp[].token_exchange (defaults applied): a
// token endpoint the client secret and the subject token may travel to,
// the client's credentials, and the parameters oauthex.ExchangeToken
// requires (audience and resource as absolute URIs).
func (v *validator) tokenExchange(key string, te *MCPTokenExchange) {
	switch {
	case te.TokenURL == "":
		v.add(key+".token_url", "required: the security token service's token endpoint")
	default:
		v.tokenURL(key+".token_url", te.TokenURL)
	}
	switch {
	case te.ClientID == "":
		v.add(key+".client_id", "required: the gateway's client id at the token endpoint")
	case !printableASCII(te.ClientID):
		v.add(key+".client_id", "must be printable ASCII")
	}
	if te.ClientSecretFile == "" {
		v.add(key+".client_secret_file", "required: a file holding the client secret (read at start)")
	} else if fi, err := os.Stat(te.ClientSecretFile); err != nil {
		v.add(key+".client_secret_file", "%s: %s", te.ClientSecretFile, pathErrReason(err))
	} else if !fi.Mode().IsRegular() {
		v.add(key+".client_secret_file", "%s is not a regular file", te.ClientSecretFile)
	} else if fi.Size() == 0 {
		v.add(key+".client_secret_file", "%s is empty", te.ClientSecretFile)
	}
	v.absoluteURI(key+".audience", te.Audience, false)
	v.absoluteURI(key+".resource", te.Resource, true)
	for j, s := range te.Scope {
		if !scopeToken(s) {
			v.add(fmt.Sprintf("%s.scope[%d]", key, j), "invalid scope %q: one non-empty scope token (no spaces, quotes or backslashes) per item", s)
		}
	}
	v.absoluteURI(key+".requested_token_type", te.RequestedTokenType, true)
}

// tokenURL checks a token endpoint: https, or http only on a loopback host
// (the client secret and the subject token would cross the network in the
// clear); no credentials; no fragment (RFC 6749 §3.2).
func (v *validator) tokenURL(key, raw string) {
	u, err := url.Parse(raw)
	switch {
	case err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http"):
		v.add(key, "must be an absolute https URL, got %q", raw)
	case u.Scheme == "http" && !IsLoopbackHost(u.Hostname()):
		v.add(key, "must use https: the client secret and the subject token must not cross the network in the clear (http is allowed only on a loopback host, for tests)")
	case u.User != nil:
		v.add(key, "must not carry credentials (user:password@); use client_id and client_secret_file")
	case u.Fragment != "" || strings.HasSuffix(raw, "#"):
		v.add(key, "must not have a fragment")
	}
}

// absoluteURI checks a value that must be an absolute URI (a URL or a
// URN), as RFC 8693 audience and resource and token type identifiers are;
// noFragment also refuses a fragment (RFC 8707 §2).
func (v *validator) absoluteURI(key, raw string, noFragment bool) {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		v.add(key, "required")
	case err != nil || u.Scheme == "" || (u.Opaque == "" && u.Host == "" && u.Path == "") || !printableASCII(raw) || strings.ContainsRune(raw, ' '):
		v.add(key, "must be an absolute URI (such as https://notes.example.com/mcp or urn:…), got %q", raw)
	case u.Scheme == "javascript" || u.Scheme == "data" || u.Scheme == "vbscript":
		v.add(key, "must not use the %s: scheme", u.Scheme)
	case noFragment && (u.Fragment != "" || strings.HasSuffix(raw, "#")):
		v.add(key, "must not have a fragment")
	}
}

// printableASCII reports whether s holds only printable ASCII (space
// included).
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
