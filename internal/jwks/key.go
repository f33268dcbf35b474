package jwks

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"fmt"
	"slices"

	"github.com/MicahParks/jwkset"
)

// MinRSABits is the smallest RSA modulus a key set may use.
const MinRSABits = 2048

// Asymmetric lists every JWS algorithm a key of a set can verify: the
// allow-list for tokens checked against a key set whose keys are not known
// in advance (one fetched from an identity provider). Which of them a
// token may use is decided per key by Fits.
var Asymmetric = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

var (
	rsaAlgorithms     = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
	ed25519Algorithms = []string{"EdDSA"}
)

// Algorithms returns the JWS algorithms that fit a public key's type and
// curve.
func Algorithms(key crypto.PublicKey) []string {
	switch k := key.(type) {
	case *rsa.PublicKey:
		return rsaAlgorithms
	case *ecdsa.PublicKey:
		if k.Curve == nil {
			return nil
		}
		switch k.Curve.Params().Name {
		case "P-256":
			return []string{"ES256"}
		case "P-384":
			return []string{"ES384"}
		case "P-521":
			return []string{"ES512"}
		}
	case ed25519.PublicKey:
		return ed25519Algorithms
	}
	return nil
}

// Fits reports whether a token signed with alg may be verified by key.
// This is what stops algorithm confusion: an RSA key never verifies an
// HMAC token, a P-256 key never an ES384 token.
func Fits(key crypto.PublicKey, alg string) bool {
	return slices.Contains(Algorithms(key), alg)
}

// errSkip marks a key that is not for signature verification ("use":
// "enc", or key_ops without "verify"): left out, not an error.
var errSkip = errors.New("not a signature verification key")

// publicKey returns the verification key of a JWK, or why it cannot be
// one: private or symmetric material, an unsupported type or curve, a weak
// RSA key, or an "alg" that does not fit the key.
func publicKey(j jwkset.JWK) (crypto.PublicKey, error) {
	m := j.Marshal()
	if m.USE == jwkset.UseEnc || (len(m.KEYOPS) > 0 && !slices.Contains(m.KEYOPS, jwkset.KeyOpsVerify)) {
		return nil, errSkip
	}
	var key crypto.PublicKey
	switch k := j.Key().(type) {
	case *rsa.PublicKey:
		if bits := k.N.BitLen(); bits < MinRSABits {
			return nil, fmt.Errorf("RSA key of %d bits is too small (minimum %d)", bits, MinRSABits)
		}
		if k.E < 3 || k.E%2 == 0 {
			return nil, errors.New("invalid RSA exponent")
		}
		key = k
	case *ecdsa.PublicKey:
		if len(Algorithms(k)) == 0 {
			return nil, errors.New("unsupported EC curve")
		}
		if _, err := k.ECDH(); err != nil { // checks the point is on the curve
			return nil, fmt.Errorf("invalid EC point: %w", err)
		}
		key = k
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("Ed25519 key must be %d bytes", ed25519.PublicKeySize)
		}
		key = k
	case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey, []byte:
		return nil, errors.New("contains private or symmetric key material; publish only public keys")
	default:
		return nil, fmt.Errorf("unsupported key type %T", k)
	}
	if alg := string(m.ALG); alg != "" && !Fits(key, alg) {
		return nil, fmt.Errorf("alg %q does not fit this %s key", alg, m.KTY)
	}
	return key, nil
}

// equal reports whether two public keys are the same key.
func equal(a, b crypto.PublicKey) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}
