package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"slices"
	"strings"
)

// MinRSABits is the smallest RSA modulus accepted from a JWKS.
const MinRSABits = 2048

// JWK is one public signature-verification key from a JWKS document.
type JWK struct {
	KeyID     string           // "kid"; may be empty
	Algorithm string           // "alg" when the key pins one, else empty
	Key       crypto.PublicKey // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
}

// Algorithms returns the JWS "alg" values this key verifies: the pinned
// one, or every algorithm that fits its type and curve.
func (k *JWK) Algorithms() []string {
	fit := keyAlgorithms(k.Key)
	if k.Algorithm == "" {
		return fit
	}
	if slices.Contains(fit, k.Algorithm) {
		return []string{k.Algorithm}
	}
	return nil
}

// Allows reports whether a token signed with alg may be verified by k.
// This is what prevents algorithm confusion: an RSA key never verifies an
// HMAC token, a P-256 key never an ES384 token.
func (k *JWK) Allows(alg string) bool {
	if k.Algorithm != "" && alg != k.Algorithm {
		return false
	}
	return slices.Contains(keyAlgorithms(k.Key), alg)
}

var (
	rsaAlgorithms     = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
	ed25519Algorithms = []string{"EdDSA"}
)

// keyAlgorithms returns the JWS algorithms that fit a public key's type.
func keyAlgorithms(key crypto.PublicKey) []string {
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

// KeySet is a parsed JWKS (RFC 7517) holding public verification keys.
type KeySet struct {
	Keys []JWK
}

// LoadJWKS reads and parses the JWKS file at path.
func LoadJWKS(path string) (*KeySet, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	ks, err := ParseJWKS(data)
	if err != nil {
		return nil, fmt.Errorf("jwks %s: %w", path, err)
	}
	return ks, nil
}

type rawJWKS struct {
	Keys []rawJWK `json:"keys"`
}

type rawJWK struct {
	Kty    string   `json:"kty"`
	Kid    string   `json:"kid"`
	Alg    string   `json:"alg"`
	Use    string   `json:"use"`
	KeyOps []string `json:"key_ops"`
	Crv    string   `json:"crv"`
	N      string   `json:"n"`
	E      string   `json:"e"`
	X      string   `json:"x"`
	Y      string   `json:"y"`
	D      string   `json:"d"` // private part of RSA, EC and OKP keys
	K      string   `json:"k"` // symmetric key
}

// ParseJWKS parses a JWKS document with RSA, EC (P-256, P-384, P-521) and
// OKP (Ed25519) public keys. Keys meant only for encryption ("use": "enc",
// or key_ops without "verify") are skipped. Private or symmetric key
// material, unknown key types, weak RSA keys, an "alg" that does not fit
// the key, and duplicate key ids are errors: a verification key file that
// holds any of them is a mistake worth stopping for.
func ParseJWKS(data []byte) (*KeySet, error) {
	var raw rawJWKS
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	ks := &KeySet{}
	kids := map[string]bool{}
	for i, rk := range raw.Keys {
		if rk.Use == "enc" || (rk.KeyOps != nil && !slices.Contains(rk.KeyOps, "verify")) {
			continue
		}
		k, err := parseJWK(rk)
		if err != nil {
			return nil, fmt.Errorf("keys[%d]: %w", i, err)
		}
		if k.KeyID != "" {
			if kids[k.KeyID] {
				return nil, fmt.Errorf("keys[%d]: duplicate kid %q", i, k.KeyID)
			}
			kids[k.KeyID] = true
		}
		ks.Keys = append(ks.Keys, k)
	}
	if len(ks.Keys) == 0 {
		return nil, errors.New("no signature verification keys")
	}
	return ks, nil
}

func parseJWK(rk rawJWK) (JWK, error) {
	if rk.D != "" || rk.K != "" {
		return JWK{}, errors.New("contains private or symmetric key material; publish only public keys")
	}
	k := JWK{KeyID: rk.Kid, Algorithm: rk.Alg}
	var err error
	switch rk.Kty {
	case "RSA":
		k.Key, err = parseRSA(rk)
	case "EC":
		k.Key, err = parseEC(rk)
	case "OKP":
		k.Key, err = parseOKP(rk)
	case "":
		return JWK{}, errors.New("kty missing")
	default:
		return JWK{}, fmt.Errorf("unsupported kty %q", rk.Kty)
	}
	if err != nil {
		return JWK{}, err
	}
	if rk.Alg != "" && !slices.Contains(keyAlgorithms(k.Key), rk.Alg) {
		return JWK{}, fmt.Errorf("alg %q does not fit this %s key", rk.Alg, rk.Kty)
	}
	return k, nil
}

func parseRSA(rk rawJWK) (*rsa.PublicKey, error) {
	n, err := b64(rk.N, "n")
	if err != nil {
		return nil, err
	}
	e, err := b64(rk.E, "e")
	if err != nil {
		return nil, err
	}
	pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n)}
	if bits := pub.N.BitLen(); bits < MinRSABits {
		return nil, fmt.Errorf("RSA key of %d bits is too small (minimum %d)", bits, MinRSABits)
	}
	eInt := new(big.Int).SetBytes(e)
	if !eInt.IsInt64() || eInt.Int64() < 3 || eInt.Int64() > 1<<31-1 || eInt.Bit(0) == 0 {
		return nil, errors.New("invalid RSA exponent")
	}
	pub.E = int(eInt.Int64())
	return pub, nil
}

func parseEC(rk rawJWK) (*ecdsa.PublicKey, error) {
	var curve elliptic.Curve
	switch rk.Crv {
	case "P-256":
		curve = elliptic.P256()
	case "P-384":
		curve = elliptic.P384()
	case "P-521":
		curve = elliptic.P521()
	default:
		return nil, fmt.Errorf("unsupported EC curve %q", rk.Crv)
	}
	size := (curve.Params().BitSize + 7) / 8
	x, err := b64(rk.X, "x")
	if err != nil {
		return nil, err
	}
	y, err := b64(rk.Y, "y")
	if err != nil {
		return nil, err
	}
	if len(x) != size || len(y) != size {
		return nil, fmt.Errorf("EC coordinates must be %d bytes for %s", size, rk.Crv)
	}
	point := append(append([]byte{4}, x...), y...)
	pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
	if err != nil {
		return nil, fmt.Errorf("invalid EC point: %w", err)
	}
	return pub, nil
}

func parseOKP(rk rawJWK) (ed25519.PublicKey, error) {
	if rk.Crv != "Ed25519" {
		return nil, fmt.Errorf("unsupported OKP curve %q", rk.Crv)
	}
	x, err := b64(rk.X, "x")
	if err != nil {
		return nil, err
	}
	if len(x) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("Ed25519 key must be %d bytes", ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(x), nil
}

// b64 decodes a base64url member, tolerating the padding some issuers add.
func b64(s, member string) ([]byte, error) {
	if s == "" {
		return nil, fmt.Errorf("%q missing", member)
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil, fmt.Errorf("%q is not base64url: %w", member, err)
	}
	return b, nil
}

// algorithms returns every algorithm some key in ks verifies.
func (ks *KeySet) algorithms() []string {
	var out []string
	for i := range ks.Keys {
		for _, a := range ks.Keys[i].Algorithms() {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}

// lookup finds the key a token names by kid. A token without kid is
// accepted only when the set has exactly one key, so the choice is never
// ambiguous.
func (ks *KeySet) lookup(kid string) (*JWK, bool) {
	if kid == "" {
		if len(ks.Keys) == 1 {
			return &ks.Keys[0], true
		}
		return nil, false
	}
	for i := range ks.Keys {
		if ks.Keys[i].KeyID == kid {
			return &ks.Keys[i], true
		}
	}
	return nil, false
}
