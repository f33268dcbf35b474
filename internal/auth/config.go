package auth

import "time"

// Defaults of JWT, applied by the config loader to keys a file leaves out
// (and by NewAuthenticator to claim names left empty).
const (
	// DefaultTenantClaim is auth.jwt.tenant_claim's default.
	DefaultTenantClaim = "tenant"
	// DefaultRolesClaim is auth.jwt.roles_claim's default.
	DefaultRolesClaim = "roles"
	// DefaultGroupsClaim is auth.jwt.groups_claim's default.
	DefaultGroupsClaim = "groups"
	// DefaultLeeway is auth.jwt.leeway's default: the clock skew allowed
	// for exp and nbf.
	DefaultLeeway = 30 * time.Second
)

// Config is everything an Authenticator needs: the auth section of
// gateway.yaml (jwt, api_keys) and the names of the configured tenants.
// Paths are absolute. The config loader fills in the defaults; a Config
// built by hand gets the default claim names for empty ones.
type Config struct {
	JWT     JWT      `yaml:"jwt"`
	APIKeys []APIKey `yaml:"api_keys"`
	// Tenants are the tenants a credential may name; a credential naming
	// any other is refused (ReasonUnknownTenant).
	Tenants []string `yaml:"-"`
}

// JWT configures bearer JWT verification (gateway.yaml auth.jwt).
type JWT struct {
	HS256SecretFile string        `yaml:"hs256_secret_file"` // created on first start if missing
	JWKSFile        string        `yaml:"jwks_file"`         // RS256 / ES256 / EdDSA public keys
	Issuer          string        `yaml:"issuer"`
	Audience        string        `yaml:"audience"`
	TenantClaim     string        `yaml:"tenant_claim"` // default DefaultTenantClaim
	RolesClaim      string        `yaml:"roles_claim"`  // default DefaultRolesClaim
	GroupsClaim     string        `yaml:"groups_claim"` // default DefaultGroupsClaim
	Leeway          time.Duration `yaml:"leeway"`       // clock skew allowed, default DefaultLeeway

	// JWKSURL is an identity provider's JWK Set, fetched at start and
	// refreshed (https, or http on a loopback host).
	JWKSURL string `yaml:"jwks_url"`
	// OIDCIssuer is an OpenID Connect issuer: its discovery document
	// (<issuer>/.well-known/openid-configuration) must name exactly this
	// issuer and gives the jwks_uri. Tokens verified by its keys must carry
	// it as "iss". At most one of JWKSFile, JWKSURL and OIDCIssuer is set.
	OIDCIssuer string `yaml:"oidc_issuer"`
	// JWKSRefresh is how often a fetched key set is fetched again
	// (default jwks.DefaultRefresh).
	JWKSRefresh time.Duration `yaml:"jwks_refresh"`
	// JWKSUnknownKIDRefresh is the shortest time between two fetches
	// caused by tokens naming a key id the set does not hold (default
	// jwks.DefaultUnknownKIDRefresh), so that garbage tokens cannot make
	// the gateway hammer the identity provider.
	JWKSUnknownKIDRefresh time.Duration `yaml:"jwks_unknown_kid_refresh"`
}

// APIKey is a service principal (gateway.yaml auth.api_keys[]). Only the
// SHA-256 of the key is stored.
type APIKey struct {
	ID     string   `yaml:"id"`
	SHA256 string   `yaml:"sha256"`
	Tenant string   `yaml:"tenant"`
	Roles  []string `yaml:"roles"`
	Groups []string `yaml:"groups"`
}
