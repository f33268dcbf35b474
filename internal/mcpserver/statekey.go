package mcpserver

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"

	"github.com/toolgate/toolgate/internal/keyfile"
)

// MinStateKeyBytes is the shortest requestState key accepted: as long as
// the HMAC-SHA256 output.
const MinStateKeyBytes = 32

// maxStateKeyFile bounds what is read from a key file.
const maxStateKeyFile = 4 << 10

// ReadStateKey reads a requestState key file (mcp.request_state_key_file):
// the key is the file's bytes without trailing line breaks, so a file made
// with `openssl rand -hex 32 > FILE` works. It refuses a file that is not
// a regular file, that group or others can access, or whose key is
// shorter than MinStateKeyBytes. No error ever holds key material.
func ReadStateKey(path string) ([]byte, error) {
	data, err := keyfile.Read(path, maxStateKeyFile)
	if err != nil {
		return nil, fmt.Errorf("requestState key: %w", err)
	}
	key := bytes.TrimRight(data, "\r\n")
	if len(key) < MinStateKeyBytes {
		return nil, fmt.Errorf("requestState key: %s holds %d bytes, need at least %d (e.g. openssl rand -hex 32)", path, len(key), MinStateKeyBytes)
	}
	return key, nil
}

// LoadOrCreateStateKey reads the requestState key file at path, creating
// it on first use: 32 random bytes, hex-encoded, mode 0600, new parent
// folders 0700. The file appears atomically and is never overwritten, so
// replicas starting at once on a shared folder agree on one key. created
// reports whether a file was written.
func LoadOrCreateStateKey(path string) (key []byte, created bool, err error) {
	key, err = ReadStateKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, false, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, false, fmt.Errorf("requestState key: %w", err)
	}
	if created, err = keyfile.CreateExclusive(path, ".mcp-request-state-key-*", []byte(hex.EncodeToString(raw)+"\n")); err != nil {
		return nil, false, fmt.Errorf("requestState key: %w", err)
	}
	// Ours, or another replica's that was first: read what is there.
	key, err = ReadStateKey(path)
	return key, created && err == nil, err
}
