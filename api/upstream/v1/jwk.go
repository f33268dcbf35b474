package v1

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
)

// JWKSPath is where the gateway serves its JWKS, unauthenticated.
const JWKSPath = "/.well-known/jwks.json"

// JWKS is the gateway's published key set (RFC 7517 §5): the active
// signing key first, then previous keys still published.
type JWKS struct {
	Keys []JWK `json:"keys"`
}

// JWK is one Ed25519 verification key (RFC 8037 §2) as the gateway
// publishes it.
type JWK struct {
	Kty string `json:"kty"` // "OKP"
	Crv string `json:"crv"` // "Ed25519"
	X   string `json:"x"`   // the public key, base64url without padding
	Kid string `json:"kid"`
	Alg string `json:"alg"` // Algorithm
	Use string `json:"use"` // "sig"
}

// NewJWK returns the JWK of an Ed25519 public key as the gateway
// publishes it.
func NewJWK(kid string, pub ed25519.PublicKey) JWK {
	return JWK{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(pub), Kid: kid, Alg: Algorithm, Use: "sig"}
}

// ErrNotEd25519 reports a JWK of another key type or curve.
var ErrNotEd25519 = errors.New("not an Ed25519 key")

// PublicKey returns the Ed25519 key of k. A key of another type or
// curve is ErrNotEd25519; an "x" that is not 32 bytes of base64url
// without padding, or an "alg" other than Algorithm (when set), is an
// error too.
func (k JWK) PublicKey() (ed25519.PublicKey, error) {
	if k.Kty != "OKP" || k.Crv != "Ed25519" {
		return nil, fmt.Errorf("%w (kty %q, crv %q)", ErrNotEd25519, k.Kty, k.Crv)
	}
	if k.Alg != "" && k.Alg != Algorithm {
		return nil, fmt.Errorf("alg %q does not fit an Ed25519 key", k.Alg)
	}
	x, err := base64.RawURLEncoding.Strict().DecodeString(k.X)
	if err != nil || len(x) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("x must be %d bytes in base64url without padding", ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(x), nil
}
