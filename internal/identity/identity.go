// Package identity holds who is calling, as a credential proved it, and the
// roles the gateway's own services check. It is a leaf: every layer (front
// doors, services, pipeline, tools) names an Identity without compiling
// against authentication or configuration.
package identity

import "time"

// The roles the gateway's services check themselves (besides what policy
// decides from input.principal.roles).
const (
	// RoleAuditor reads and verifies the audit log.
	RoleAuditor = "auditor"
	// RoleApprover decides held calls and answers questions of others.
	RoleApprover = "approver"
	// RolePolicyAdmin evaluates, replays and inspects policy.
	RolePolicyAdmin = "policy-admin"
)

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
	if id == nil {
		return false
	}
	for _, r := range id.Roles {
		if r == role {
			return true
		}
	}
	return false
}
