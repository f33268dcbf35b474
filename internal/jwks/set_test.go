package jwks

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/golang-jwt/jwt/v5"
)

type testKeys struct {
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
	ed  ed25519.PrivateKey
}

// keys are generated once: RSA key generation is slow.
var keys = sync.OnceValue(func() testKeys {
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	_, edk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return testKeys{rsa: rk, ec: ek, ed: edk}
})

func b64u(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jwkMaps publishes the public halves of k under kids "rsa-1", "ec-1", "ed-1".
func jwkMaps(t testing.TB, k testKeys) []map[string]any {
	t.Helper()
	point, err := k.ec.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return []map[string]any{
		{"kty": "RSA", "kid": "rsa-1", "use": "sig", "n": b64u(k.rsa.N.Bytes()), "e": b64u(big.NewInt(int64(k.rsa.E)).Bytes())},
		{"kty": "EC", "kid": "ec-1", "crv": "P-256", "alg": "ES256", "x": b64u(point[1:33]), "y": b64u(point[33:])},
		{"kty": "OKP", "kid": "ed-1", "crv": "Ed25519", "x": b64u(k.ed.Public().(ed25519.PublicKey))},
	}
}

func setJSON(t testing.TB, keys []map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// token is a token's header as Key sees it (Key never looks further).
func token(m jwt.SigningMethod, kid string) *jwt.Token {
	tok := jwt.New(m)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	return tok
}

func TestParse(t *testing.T) {
	k := keys()
	good := jwkMaps(t, k)
	variant := func(i int, edit func(map[string]any)) []byte {
		out := make([]map[string]any, len(good))
		for j, m := range good {
			out[j] = maps.Clone(m)
		}
		edit(out[i])
		return setJSON(t, out)
	}

	s, err := Parse(setJSON(t, good))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Algorithms(); !slices.Equal(got, []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "EdDSA"}) {
		t.Errorf("algorithms = %v", got)
	}
	if !s.Loaded() {
		t.Error("a static set is not loaded")
	}

	bad := []struct {
		name string
		data []byte
		want string
	}{
		{"not JSON", []byte("{"), "invalid JSON"},
		{"duplicate member", []byte(`{"keys":[],"keys":[]}`), "invalid JSON"},
		{"no keys", []byte(`{"keys":[]}`), "no signature verification keys"},
		{"private RSA key", variant(0, func(m map[string]any) { m["d"] = b64u(k.rsa.D.Bytes()) }), "private"},
		{"private EC key", variant(1, func(m map[string]any) { m["d"] = b64u(k.ec.D.Bytes()) }), "private"},
		{"symmetric key", []byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}]}`), "symmetric"},
		{"unknown kty", variant(0, func(m map[string]any) { m["kty"] = "XYZ" }), "keys[0]"},
		{"alg that does not fit", variant(1, func(m map[string]any) { m["alg"] = "RS256" }), "does not fit"},
		{"weak RSA key", variant(0, func(m map[string]any) { m["n"] = b64u(append([]byte{0xc1}, make([]byte, 127)...)) }), "too small"},
		{"even RSA exponent", variant(0, func(m map[string]any) { m["e"] = b64u([]byte{4}) }), "keys[0]"},
		{"EC point off the curve", variant(1, func(m map[string]any) { m["y"] = m["x"] }), "keys[1]"},
		{"unsupported curve", variant(1, func(m map[string]any) { m["crv"] = "secp256k1" }), "keys[1]"},
		{"short Ed25519 key", variant(2, func(m map[string]any) { m["x"] = b64u([]byte("short")) }), "keys[2]"},
		{"duplicate kid", variant(2, func(m map[string]any) { m["kid"] = "rsa-1" }), "duplicate kid"},
		{"bad base64", variant(2, func(m map[string]any) { m["x"] = "!!" }), "keys[2]"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(tt.data)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}

	onlyEnc, err := Parse(variant(0, func(m map[string]any) { m["use"] = "enc" }))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := onlyEnc.Key(context.Background(), token(jwt.SigningMethodRS256, "rsa-1")); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("an encryption key verifies: %v", err)
	}
	noVerify, err := Parse(variant(2, func(m map[string]any) { m["key_ops"] = []string{"encrypt"} }))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := noVerify.Key(context.Background(), token(jwt.SigningMethodEdDSA, "ed-1")); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("a key without the verify op verifies: %v", err)
	}
}

func TestKeyPicksOnlyAFittingKey(t *testing.T) {
	k := keys()
	s, err := Parse(setJSON(t, jwkMaps(t, k)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tests := []struct {
		name string
		tok  *jwt.Token
		want error
	}{
		{"RS256 by kid", token(jwt.SigningMethodRS256, "rsa-1"), nil},
		{"PS512 by kid", token(jwt.SigningMethodPS512, "rsa-1"), nil},
		{"ES256 by kid", token(jwt.SigningMethodES256, "ec-1"), nil},
		{"EdDSA by kid", token(jwt.SigningMethodEdDSA, "ed-1"), nil},
		{"RS256 under the EC kid", token(jwt.SigningMethodRS256, "ec-1"), ErrAlgorithm},
		{"ES384 under a P-256 kid", token(jwt.SigningMethodES384, "ec-1"), ErrAlgorithm},
		{"EdDSA under the RSA kid", token(jwt.SigningMethodEdDSA, "rsa-1"), ErrAlgorithm},
		{"unknown kid", token(jwt.SigningMethodRS256, "rsa-2"), ErrUnknownKey},
		{"no kid with several keys", token(jwt.SigningMethodRS256, ""), ErrUnknownKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kid, key, err := s.Key(ctx, tt.tok)
			if tt.want != nil {
				if !errors.Is(err, tt.want) || key != nil {
					t.Fatalf("Key = %v, %v; want %v", key, err, tt.want)
				}
				return
			}
			if err != nil || kid != tt.tok.Header["kid"] || !s.Holds(kid, key) {
				t.Fatalf("Key = %q %v, %v", kid, key, err)
			}
		})
	}
	// A kid that is not a string names no key.
	tok := token(jwt.SigningMethodES256, "ec-1")
	tok.Header["kid"] = 7.0
	if _, _, err := s.Key(ctx, tok); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("numeric kid: %v", err)
	}
}

func TestSingleKeySetVerifiesTokensWithoutKid(t *testing.T) {
	k := keys()
	point, err := k.ec.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse(setJSON(t, []map[string]any{{"kty": "EC", "crv": "P-256", "x": b64u(point[1:33]), "y": b64u(point[33:])}}))
	if err != nil {
		t.Fatal(err)
	}
	kid, key, err := s.Key(context.Background(), token(jwt.SigningMethodES256, ""))
	if err != nil || kid != "" || !s.Holds("", key) {
		t.Fatalf("Key = %q %v %v", kid, key, err)
	}
	if _, _, err := s.Key(context.Background(), token(jwt.SigningMethodES384, "")); !errors.Is(err, ErrAlgorithm) {
		t.Fatalf("ES384 with the one P-256 key: %v", err)
	}
}
