// Package auth turns a bearer credential into a verified Identity. Tenant,
// principal, roles and groups come only from the credential; nothing in a
// request body is ever a second source of identity.
package auth

import "time"

// Identity is who is calling, as proven by a credential.
type Identity struct {
	Tenant    string
	Principal string
	Roles     []string
	Groups    []string
	Client    string         // the calling platform (JWT "azp"/"client_id", or the API key id)
	Claims    map[string]any // other verified JWT claims, shown to policy as principal.claims
	Method    string         // "jwt" or "api_key"
	// Expires is when the credential stops verifying (a JWT's "exp");
	// zero for credentials without an expiry (API keys).
	Expires time.Time
}

// HasRole reports whether the identity holds role.
func (id *Identity) HasRole(role string) bool {
	for _, r := range id.Roles {
		if r == role {
			return true
		}
	}
	return false
}
