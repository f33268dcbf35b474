package auth

import (
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// MintClaims describes a token for MintHS256.
type MintClaims struct {
	Tenant   string
	Subject  string
	Roles    []string
	TTL      time.Duration
	Issuer   string // "iss", set when non-empty
	Audience string // "aud", set when non-empty

	// Claim names as configured (auth.jwt.tenant_claim / roles_claim);
	// empty means the defaults "tenant" and "roles".
	TenantClaim string
	RolesClaim  string
}

// MintHS256 returns a compact JWT signed with secret (the `gateway token`
// command, development and tests). It sets iat and nbf to now and exp to
// now+TTL.
func MintHS256(secret []byte, c MintClaims, now time.Time) (string, error) {
	if len(secret) < MinHS256SecretBytes {
		return "", fmt.Errorf("mint: secret is %d bytes, need at least %d", len(secret), MinHS256SecretBytes)
	}
	if c.Tenant == "" || c.Subject == "" {
		return "", errors.New("mint: tenant and subject are required")
	}
	if len(c.Subject) > maxSubjectBytes {
		return "", fmt.Errorf("mint: subject longer than %d bytes", maxSubjectBytes)
	}
	if c.TTL <= 0 {
		return "", errors.New("mint: ttl must be positive")
	}
	tenantClaim := orDefault(c.TenantClaim, DefaultTenantClaim)
	rolesClaim := orDefault(c.RolesClaim, DefaultRolesClaim)
	if registered[tenantClaim] || registered[rolesClaim] || tenantClaim == rolesClaim {
		return "", fmt.Errorf("mint: claim names %q and %q must be distinct and not registered JWT claims", tenantClaim, rolesClaim)
	}

	claims := jwt.MapClaims{
		"sub":       c.Subject,
		"iat":       now.Unix(),
		"nbf":       now.Unix(),
		"exp":       now.Add(c.TTL).Unix(),
		tenantClaim: c.Tenant,
	}
	if len(c.Roles) > 0 {
		claims[rolesClaim] = c.Roles
	}
	if c.Issuer != "" {
		claims["iss"] = c.Issuer
	}
	if c.Audience != "" {
		claims["aud"] = c.Audience
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
