package mcpserver

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
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
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("requestState key: %w", err)
	}
	defer f.Close()
	// Check the file opened, not the name.
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("requestState key: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("requestState key: %s is not a regular file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, fmt.Errorf("requestState key: %s has mode %04o; group and others must have no access (chmod 600 %s)", path, perm, path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxStateKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("requestState key: %w", err)
	}
	if len(data) > maxStateKeyFile {
		return nil, fmt.Errorf("requestState key: %s is larger than %d bytes", path, maxStateKeyFile)
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
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("requestState key: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return nil, false, fmt.Errorf("requestState key: %w", err)
	}
	// A temporary file (CreateTemp uses 0600) hard-linked into place: the
	// link fails if the name exists, and readers never see a partly
	// written key.
	tmp, err := os.CreateTemp(dir, ".mcp-request-state-key-*")
	if err != nil {
		return nil, false, fmt.Errorf("requestState key: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(hex.EncodeToString(raw) + "\n")
	if werr == nil {
		werr = tmp.Chmod(0o600)
	}
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return nil, false, fmt.Errorf("requestState key: %w", werr)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another replica created it first: use its key.
			key, err := ReadStateKey(path)
			return key, false, err
		}
		return nil, false, fmt.Errorf("requestState key: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	key, err = ReadStateKey(path)
	return key, err == nil, err
}
