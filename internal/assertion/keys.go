package assertion

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/toolgate/toolgate/internal/keyfile"
)

// key is one Ed25519 key: priv is nil for a key that is only published.
type key struct {
	kid  string
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey
}

// EnsureKey creates an Ed25519 signing key at path if there is none: a
// PKCS#8 "PRIVATE KEY" PEM in a file of mode 0600 whose new parent folders
// get mode 0700. The file appears atomically and is never overwritten, so
// replicas starting at once agree on one key. created reports whether a
// file was written.
func EnsureKey(path string) (created bool, err error) {
	if _, err := os.Stat(path); err == nil {
		_, err := readKey(path)
		return false, err
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("assertion key: %w", err)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return false, fmt.Errorf("assertion key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return false, fmt.Errorf("assertion key: %w", err)
	}
	// A hard link fails if the name exists: the first writer wins.
	created, err = keyfile.CreateExclusive(path, ".assertion-key-*", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err != nil {
		return false, fmt.Errorf("assertion key: %w", err)
	}
	if !created {
		_, err := readKey(path)
		return false, err
	}
	return true, nil
}

// readKey reads an Ed25519 key from a PEM file: a PKCS#8 private key, or a
// PKIX public key (a previous key that is only published).
func readKey(path string) (key, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return key{}, fmt.Errorf("assertion key: %w", err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return key{}, fmt.Errorf("assertion key %s: no PEM block", path)
	}
	var k key
	switch block.Type {
	case "PRIVATE KEY":
		p, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return key{}, fmt.Errorf("assertion key %s: %w", path, err)
		}
		priv, ok := p.(ed25519.PrivateKey)
		if !ok {
			return key{}, fmt.Errorf("assertion key %s: not an Ed25519 key", path)
		}
		k.priv, k.pub = priv, priv.Public().(ed25519.PublicKey)
	case "PUBLIC KEY":
		p, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return key{}, fmt.Errorf("assertion key %s: %w", path, err)
		}
		pub, ok := p.(ed25519.PublicKey)
		if !ok {
			return key{}, fmt.Errorf("assertion key %s: not an Ed25519 key", path)
		}
		k.pub = pub
	default:
		return key{}, fmt.Errorf("assertion key %s: PEM block %q, want PRIVATE KEY or PUBLIC KEY", path, block.Type)
	}
	k.kid = thumbprint(k.pub)
	return k, nil
}

// thumbprint is the RFC 7638 JWK thumbprint of an Ed25519 key (RFC 8037
// §2), used as its kid: every replica that loads the same file names the
// key the same way.
func thumbprint(pub ed25519.PublicKey) string {
	canonical := `{"crv":"Ed25519","kty":"OKP","x":"` + base64.RawURLEncoding.EncodeToString(pub) + `"}`
	sum := sha256.Sum256([]byte(canonical))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}
