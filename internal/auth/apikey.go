package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"slices"

	"github.com/toolgate/toolgate/internal/identity"
)

// apiKey is a configured service principal, keyed by the SHA-256 of its
// secret so the secret itself is never stored.
type apiKey struct {
	digest [sha256.Size]byte
	id     string
	tenant string
	roles  []string
	groups []string
}

// verifyAPIKey looks token up by its SHA-256. Every configured digest is
// compared in constant time, and the loop never exits early, so timing
// says nothing about which key (if any) nearly matched.
func (a *Authenticator) verifyAPIKey(token string) (*identity.Identity, error) {
	sum := sha256.Sum256([]byte(token))
	var match *apiKey
	for i := range a.apiKeys {
		if subtle.ConstantTimeCompare(sum[:], a.apiKeys[i].digest[:]) == 1 {
			match = &a.apiKeys[i]
		}
	}
	if match == nil {
		return nil, refuse(ReasonUnknownAPIKey, nil)
	}
	if _, ok := a.tenants[match.tenant]; !ok {
		return nil, refuse(ReasonUnknownTenant, nil)
	}
	return &identity.Identity{
		Tenant:    match.tenant,
		Principal: match.id,
		Roles:     slices.Clone(match.roles),
		Groups:    slices.Clone(match.groups),
		Client:    match.id,
		Method:    "api_key",
	}, nil
}
