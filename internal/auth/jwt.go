package auth

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/jwks"
)

// maxSubjectBytes bounds the principal id that reaches policy and audit.
const maxSubjectBytes = 256

// registered are the RFC 7519 claims consumed by verification; they are
// left out of Identity.Claims.
var registered = map[string]bool{
	"iss": true, "sub": true, "aud": true, "exp": true, "nbf": true, "iat": true, "jti": true,
}

var errAlgMismatch = errors.New("the key does not verify this alg")

// usedKey is the key set entry that verified a token: the token cache
// asks the set whether it still holds it. key is nil for HS256.
type usedKey struct {
	kid string
	key crypto.PublicKey
}

func (a *Authenticator) verifyJWT(ctx context.Context, token string) (*identity.Identity, error) {
	if len(a.methods) == 0 {
		return nil, refuse(ReasonAlgorithm, errors.New("no JWT keys configured"))
	}
	now := a.now()
	if e, ok := a.cache.get(token, now); ok {
		if e.key == nil || a.keys.Holds(e.kid, e.key) {
			return e.id, nil
		}
		// The provider no longer publishes the key that verified this
		// token: verify it again, which refuses it.
		a.cache.drop(token)
	}
	// Before any key is looked up (an unknown kid may fetch the key set):
	// golang-jwt decodes with encoding/json, which keeps the last of
	// duplicate members and knows nothing of crit.
	if err := jwks.CheckCompact(token); err != nil {
		if errors.Is(err, jwks.ErrCritical) {
			return nil, refuse(ReasonCriticalHeader, err)
		}
		return nil, refuse(ReasonMalformedToken, err)
	}
	claims := jwt.MapClaims{}
	var used usedKey
	tok, err := a.parser.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		return a.keyFunc(ctx, t, &used)
	})
	if err != nil {
		return nil, a.classify(tok, err)
	}
	if used.key != nil && a.idpIssuer != "" {
		// The provider's keys vouch only for the issuer its discovery
		// document names (HS256 tokens are the gateway's own and follow
		// auth.jwt.issuer alone).
		switch iss, _ := claims.GetIssuer(); iss {
		case a.idpIssuer:
		case "":
			return nil, refuse(ReasonMissingClaim, errors.New("iss missing from a token of the identity provider"))
		default:
			return nil, refuse(ReasonBadIssuer, fmt.Errorf("iss %q is not the identity provider's %q", iss, a.idpIssuer))
		}
	}
	id, err := a.identity(claims)
	if err != nil {
		return nil, err
	}
	// The parser required exp and checked both times with the leeway; the
	// cache applies the same window to later uses of this token.
	e := cachedToken{id: id, kid: used.kid, key: used.key}
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil {
		e.expires = exp.Add(a.leeway)
	}
	if nbf, err := claims.GetNotBefore(); err == nil && nbf != nil {
		e.notBefore = nbf.Add(-a.leeway)
	}
	if !e.expires.IsZero() {
		a.cache.put(token, e, now)
	}
	return id, nil
}

// keyFunc picks the verification key for a token whose alg already passed
// the parser's allow-list, and records it in used. The HS256 secret is
// only ever returned for HS256 and a key set's key only for an alg that
// fits it.
func (a *Authenticator) keyFunc(ctx context.Context, t *jwt.Token, used *usedKey) (any, error) {
	alg := t.Method.Alg()
	if alg == jwt.SigningMethodHS256.Alg() {
		if a.secret == nil {
			return nil, errAlgMismatch
		}
		return a.secret, nil
	}
	if a.keys == nil {
		return nil, errAlgMismatch
	}
	kid, key, err := a.keys.Key(ctx, t)
	if err != nil {
		return nil, err
	}
	*used = usedKey{kid: kid, key: key}
	return key, nil
}

// classify turns a jwt parse error into a Reason.
func (a *Authenticator) classify(t *jwt.Token, err error) error {
	var r Reason
	switch {
	case errors.Is(err, jwks.ErrNotLoaded):
		r = ReasonKeysNotLoaded
	case errors.Is(err, jwks.ErrUnknownKey):
		r = ReasonUnknownKey
	case errors.Is(err, errAlgMismatch), errors.Is(err, jwks.ErrAlgorithm):
		r = ReasonAlgorithm
	case errors.Is(err, jwt.ErrTokenMalformed):
		r = ReasonMalformedToken
	case errors.Is(err, jwt.ErrTokenUnverifiable):
		r = ReasonAlgorithm // alg missing or unknown
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		// The parser reports an alg outside the allow-list ("none",
		// HS256 without a secret) as a signature error.
		r = ReasonBadSignature
		if t != nil && t.Method != nil && !slices.Contains(a.methods, t.Method.Alg()) {
			r = ReasonAlgorithm
		}
	case errors.Is(err, jwt.ErrTokenExpired):
		r = ReasonExpired
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		r = ReasonNotYetValid
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		r = ReasonBadIssuer
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		r = ReasonBadAudience
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		r = ReasonMissingClaim
	default:
		r = ReasonBadClaims
	}
	return refuse(r, err)
}

// identity builds the Identity from verified claims.
func (a *Authenticator) identity(claims jwt.MapClaims) (*identity.Identity, error) {
	tenant, _ := claims[a.tenantClaim].(string)
	if tenant == "" {
		return nil, refuse(ReasonMissingTenant, nil)
	}
	if _, ok := a.tenants[tenant]; !ok {
		return nil, refuse(ReasonUnknownTenant, nil)
	}
	sub, _ := claims["sub"].(string)
	if sub == "" {
		return nil, refuse(ReasonMissingSubject, nil)
	}
	if len(sub) > maxSubjectBytes {
		return nil, refuse(ReasonBadClaims, fmt.Errorf("sub longer than %d bytes", maxSubjectBytes))
	}
	if strings.ContainsFunc(sub, unicode.IsControl) || !utf8.ValidString(sub) {
		// The principal is recorded and indexed; control characters (NUL
		// above all) have no place in an identifier.
		return nil, refuse(ReasonBadClaims, fmt.Errorf("sub contains control characters"))
	}
	roles, err := stringList(claims, a.rolesClaim)
	if err != nil {
		return nil, refuse(ReasonBadClaims, err)
	}
	groups, err := stringList(claims, a.groupsClaim)
	if err != nil {
		return nil, refuse(ReasonBadClaims, err)
	}
	client, _ := claims["azp"].(string)
	if client == "" {
		client, _ = claims["client_id"].(string)
	}
	rest := make(map[string]any, len(claims))
	for k, v := range claims {
		if !registered[k] {
			rest[k] = v
		}
	}
	var expires time.Time
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil {
		expires = exp.Time
	}
	return &identity.Identity{
		Tenant:    tenant,
		Principal: sub,
		Roles:     roles,
		Groups:    groups,
		Client:    client,
		Claims:    rest,
		Method:    "jwt",
		Expires:   expires,
	}, nil
}

// stringList reads a claim that is an array of strings or one
// space-separated string (the OAuth "scope" style). Missing or null is
// an empty list.
func stringList(claims jwt.MapClaims, name string) ([]string, error) {
	switch v := claims[name].(type) {
	case nil:
		return nil, nil
	case string:
		return strings.Fields(v), nil
	case []any:
		out := make([]string, 0, len(v))
		for i, item := range v {
			s, ok := item.(string)
			if !ok || s == "" {
				return nil, fmt.Errorf("claim %q: item %d is not a non-empty string", name, i)
			}
			out = append(out, s)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("claim %q is neither a string nor an array of strings", name)
	}
}
