package jwks_test

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"

	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/internal/jwks"
)

// Verifying a JWT with a key set: CheckCompact first (no crit, no
// duplicate members), then golang-jwt with the set's algorithms and Key
// as its key function. A remote set (NewRemote) is used the same way.
func ExampleSet_Key() {
	priv := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)) // a fixed key, for the example
	x := base64.RawURLEncoding.EncodeToString(priv.Public().(ed25519.PublicKey))
	set, err := jwks.Parse([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k1","use":"sig","x":"` + x + `"}]}`))
	if err != nil {
		panic(err)
	}

	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"sub": "alice"})
	t.Header["kid"] = "k1"
	token, _ := t.SignedString(priv)

	if err := jwks.CheckCompact(token); err != nil {
		panic(err)
	}
	claims := jwt.MapClaims{}
	_, err = jwt.ParseWithClaims(token, claims, func(t *jwt.Token) (any, error) {
		_, key, err := set.Key(context.Background(), t)
		return key, err
	}, jwt.WithValidMethods(set.Algorithms()))
	fmt.Println(claims["sub"], err)
	// Output: alice <nil>
}
