// Package keyfile reads and creates the gateway's secret files (signing
// keys, HMAC keys, development secrets) the one careful way: the file
// opened is the file checked (no swap between a check and the read), it
// must be a regular file that neither group nor others can access, its
// size is bounded, and a new file appears at once, complete, mode 0600,
// without ever replacing one that exists — so replicas starting together
// on a shared folder agree on one key.
package keyfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
)

// Errors Read returns for a file that is there but unfit; its other
// errors are the file system's (*fs.PathError).
var (
	ErrNotRegular = errors.New("not a regular file")
	ErrInsecure   = errors.New("group or others can access it")
	ErrTooLarge   = errors.New("too large")
)

// Error is an unfit file: a message naming the path, and the reason (one
// of the errors above) for errors.Is.
type Error struct {
	reason error
	msg    string
}

func (e *Error) Error() string { return e.msg }
func (e *Error) Unwrap() error { return e.reason }

// Read returns the content of the secret file at path, at most max bytes.
// Messages name the path and never hold content.
func Read(path string, max int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Check the file opened, not the name.
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &Error{ErrNotRegular, fmt.Sprintf("%s is not a regular file", path)}
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, &Error{ErrInsecure, fmt.Sprintf("%s has mode %04o; group and others must have no access (chmod 600 %s)", path, perm, path)}
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(data) > max {
		return nil, &Error{ErrTooLarge, fmt.Sprintf("%s is larger than %d bytes", path, max)}
	}
	return data, nil
}

// CreateExclusive writes data to path unless a file is there: through a
// temporary file in the same folder (named by pattern, mode 0600, synced)
// hard-linked into place, so readers never see a partial file and an
// existing one is never replaced. Missing folders are made 0700. It
// reports false, and no error, when path already existed (another
// process won): read it.
func CreateExclusive(path, pattern string, data []byte) (created bool, err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	tmp, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.Write(data)
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
		return false, werr
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, err
	}
	// Make the new name durable too.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return true, nil
}
