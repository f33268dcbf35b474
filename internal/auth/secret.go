package auth

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/toolgate/toolgate/internal/keyfile"
)

// MinHS256SecretBytes is the shortest HS256 secret accepted (RFC 7518
// §3.2: a key at least as long as the hash output).
const MinHS256SecretBytes = 32

// ReadHS256Secret reads an HS256 secret: the file's bytes without trailing
// line breaks. It fails when the secret is shorter than MinHS256SecretBytes.
func ReadHS256Secret(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("hs256 secret: %w", err)
	}
	secret := bytes.TrimRight(data, "\r\n")
	if len(secret) < MinHS256SecretBytes {
		return nil, fmt.Errorf("hs256 secret %s: %d bytes, need at least %d", path, len(secret), MinHS256SecretBytes)
	}
	return secret, nil
}

// EnsureHS256Secret creates a development HS256 secret at path if there is
// none: 32 random bytes, hex-encoded, in a file of mode 0600 whose new
// parent folders get mode 0700. An existing file is left alone but must
// hold a long enough secret. created reports whether a file was written.
//
// The file appears atomically and is never overwritten, so two gateways
// starting at once agree on one secret.
func EnsureHS256Secret(path string) (created bool, err error) {
	if _, err := os.Stat(path); err == nil {
		_, err := ReadHS256Secret(path)
		return false, err
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("hs256 secret: %w", err)
	}

	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return false, fmt.Errorf("hs256 secret: %w", err)
	}
	created, err = keyfile.CreateExclusive(path, ".hs256-secret-*", []byte(hex.EncodeToString(raw)))
	if err != nil {
		return false, fmt.Errorf("hs256 secret: %w", err)
	}
	if !created { // another gateway was first: its secret must do
		_, err := ReadHS256Secret(path)
		return false, err
	}
	return true, nil
}
