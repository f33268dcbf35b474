package tlog

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/toolgate/toolgate/internal/keyfile"
)

// The signing key file (audit.signing_key_file) is text, one key a line;
// blank lines and lines starting with "#" are ignored:
//
//	# Toolgate audit checkpoint signing key. Keep secret: mode 0600.
//	PRIVATE+KEY+toolgate-audit+1a2b3c4d+AbC…
//	toolgate-audit+9f8e7d6c+AdE…
//
// Exactly one line is a note signer key (PRIVATE+KEY+name+hash+base64):
// the current key, which signs. Every other key line is the verifier key
// of a previous key, newest first, kept so that checkpoints it signed still
// verify; a retired private key is not kept. The file must be a regular
// file that neither group nor others can access.

// ErrInsecureKeyFile reports a signing key file that group or others can
// read or write, or that is not a regular file.
var ErrInsecureKeyFile = errors.New("tlog: signing key file is not private")

// ErrBadKeyFile reports a signing key file that does not parse, or whose
// key has another name than the one asked for.
var ErrBadKeyFile = errors.New("tlog: bad signing key file")

// maxKeyFile bounds what is read from a key file: a few hundred keys.
const maxKeyFile = 64 << 10

const keyFileHeader = "# Toolgate audit checkpoint signing key (C2SP signed note, Ed25519). Keep secret: mode 0600.\n" +
	"# The PRIVATE+KEY line signs; other lines are verifier keys of previous keys, newest first.\n"

// LoadOrCreateSigner loads the signing key file at path, creating it with a
// new Ed25519 key named name (use KeyName) on first use: mode 0600, new
// parent folders 0700. The file appears atomically and is never
// overwritten here, so replicas starting at once agree on one key. It
// refuses (ErrInsecureKeyFile) a file that group or others can access, and
// (ErrBadKeyFile) one whose current key is not named name.
func LoadOrCreateSigner(path, name string) (*Signer, error) {
	s, err := loadSigner(path, name)
	if !errors.Is(err, fs.ErrNotExist) {
		return s, err
	}
	skey, _, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		return nil, fmt.Errorf("%w: key name %q: %v", ErrBadKey, name, err)
	}
	if err := writeKeyFile(path, skey, nil, false); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another process created it first: use its key.
			return loadSigner(path, name)
		}
		return nil, err
	}
	return loadSigner(path, name)
}

// RotateSigner replaces the current key in the file at path with a new
// key named name, keeping the old key's verifier key (and those of all
// earlier keys) so that checkpoints they signed still verify. The file is
// replaced atomically. Running gateways keep signing with the key they
// loaded until they restart. Rotation is an operator's action: two at once
// on one file both succeed, and the first one's new key is lost.
func RotateSigner(path, name string) (*Signer, error) {
	old, err := loadSigner(path, "")
	if err != nil {
		return nil, err
	}
	previous := old.Verifier().Keys()
	var skey string
	for skey == "" {
		k, vkey, err := note.GenerateKey(rand.Reader, name)
		if err != nil {
			return nil, fmt.Errorf("%w: key name %q: %v", ErrBadKey, name, err)
		}
		// Two keys of one name and 4-byte key hash would make every note
		// they sign ambiguous to verify: draw again (odds 1 in 2^32).
		skey = k
		for _, p := range previous {
			if keyID(p) == keyID(vkey) {
				skey = ""
			}
		}
	}
	if err := writeKeyFile(path, skey, previous, true); err != nil {
		return nil, err
	}
	return loadSigner(path, name)
}

// keyID is the "name+hash" part of a verifier key.
func keyID(vkey string) string {
	name, rest, _ := strings.Cut(vkey, "+")
	hash, _, _ := strings.Cut(rest, "+")
	return name + "+" + hash
}

// loadSigner reads and checks the key file; name "" accepts any key name.
func loadSigner(path, name string) (*Signer, error) {
	data, err := keyfile.Read(path, maxKeyFile)
	switch {
	case errors.Is(err, keyfile.ErrNotRegular), errors.Is(err, keyfile.ErrInsecure):
		return nil, fmt.Errorf("%w: %s", ErrInsecureKeyFile, err)
	case errors.Is(err, keyfile.ErrTooLarge):
		return nil, fmt.Errorf("%w: %s", ErrBadKeyFile, err)
	case err != nil:
		return nil, fmt.Errorf("tlog: signing key file: %w", err)
	}
	var skey string
	var previous []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for lineNo := 1; sc.Scan(); lineNo++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "PRIVATE+KEY+"):
			if skey != "" {
				return nil, fmt.Errorf("%w: %s has more than one private key (line %d)", ErrBadKeyFile, path, lineNo)
			}
			skey = line
		default:
			if _, err := note.NewVerifier(line); err != nil {
				// Never echo the line: it may be a mangled private key.
				return nil, fmt.Errorf("%w: %s line %d is not a verifier key", ErrBadKeyFile, path, lineNo)
			}
			previous = append(previous, line)
		}
	}
	if skey == "" {
		return nil, fmt.Errorf("%w: %s has no private key line", ErrBadKeyFile, path)
	}
	s, err := NewSigner(skey, previous...)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: private key does not parse", ErrBadKeyFile, path)
	}
	if name != "" && s.Name() != name {
		return nil, fmt.Errorf("%w: %s holds key %q, want %q", ErrBadKeyFile, path, s.Name(), name)
	}
	return s, nil
}

// writeKeyFile writes a key file through a temporary file in the same
// folder: hard-linked into place when creating (failing with fs.ErrExist
// if the name exists), renamed over the old file when replacing.
func writeKeyFile(path, skey string, previous []string, replace bool) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("tlog: signing key file: %w", err)
	}
	var b strings.Builder
	b.WriteString(keyFileHeader)
	b.WriteString(skey + "\n")
	for _, k := range previous {
		b.WriteString(k + "\n")
	}
	// CreateTemp makes the file with mode 0600.
	tmp, err := os.CreateTemp(dir, ".toolgate-audit-key-*")
	if err != nil {
		return fmt.Errorf("tlog: signing key file: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(b.String())
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
		return fmt.Errorf("tlog: signing key file: %w", werr)
	}
	if replace {
		err = os.Rename(tmp.Name(), path)
	} else {
		err = os.Link(tmp.Name(), path)
	}
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		return fmt.Errorf("tlog: signing key file: %w", err)
	}
	// Make the new name durable too.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
