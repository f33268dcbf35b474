package assertion

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writeSeedKey writes the Ed25519 key of a fixed seed: a private key
// file, or only its public half.
func writeSeedKey(t *testing.T, path string, seed byte, public bool) {
	t.Helper()
	s := make([]byte, ed25519.SeedSize)
	for i := range s {
		s[i] = seed
	}
	priv := ed25519.NewKeyFromSeed(s)
	var block *pem.Block
	if public {
		der, err := x509.MarshalPKIXPublicKey(priv.Public())
		if err != nil {
			t.Fatal(err)
		}
		block = &pem.Block{Type: "PUBLIC KEY", Bytes: der}
	} else {
		der, err := x509.MarshalPKCS8PrivateKey(priv)
		if err != nil {
			t.Fatal(err)
		}
		block = &pem.Block{Type: "PRIVATE KEY", Bytes: der}
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The published key set is byte for byte what upstream services have
// always read: member order, kid (RFC 7638 thumbprint), active key first.
func TestJWKSBytesAreStable(t *testing.T) {
	dir := t.TempDir()
	active, previous := filepath.Join(dir, "active.pem"), filepath.Join(dir, "previous.pub.pem")
	writeSeedKey(t, active, 1, false)
	writeSeedKey(t, previous, 2, true)
	s, err := New(Options{Issuer: "toolgate", TTL: time.Minute, SigningKeyFile: active, PublishedKeyFiles: []string{previous}})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"keys":[{"kty":"OKP","crv":"Ed25519","x":"iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w","kid":"UDDReOZl1ipXAfp9wYsm13sDBMK5og--QWdBjzuf6o4","alg":"EdDSA","use":"sig"},` +
		`{"kty":"OKP","crv":"Ed25519","x":"gTl3Dqh9F19Wo1Rmw0x-zMuNipG07jeiXfYPW4_Js5Q","kid":"aVBtapLd11SUVKIMGJfPzOEDuN0sXcmzJQNVT-_sKEU","alg":"EdDSA","use":"sig"}]}`
	if got := string(s.JWKS()); got != want {
		t.Fatalf("JWKS\n got %s\nwant %s", got, want)
	}
}
