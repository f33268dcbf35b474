package tlog

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/transparency-dev/formats/log"
	"golang.org/x/mod/sumdb/note"
)

// KeyName is the signed-note key name Toolgate gives its audit checkpoint
// key. It appears in every verifier key ("toolgate-audit+<hash>+<key>") and
// signature line ("— toolgate-audit <base64>").
const KeyName = "toolgate-audit"

// OriginPrefix starts the origin line of every Toolgate checkpoint.
const OriginPrefix = "toolgate/"

// Origin returns the checkpoint origin of a tenant's log: "toolgate/<tenant>".
func Origin(tenant string) string {
	return OriginPrefix + tenant
}

// Checkpoint is a signed statement of a log's size and root hash (the
// C2SP tlog-checkpoint body: origin line, decimal size, base64 root).
type Checkpoint struct {
	Origin string
	Size   uint64
	Root   []byte
}

// Errors from opening a checkpoint. Each is wrapped with detail that is safe
// to show an auditor (key names and hashes, sizes, origins; never key
// material).
var (
	// ErrMalformedCheckpoint: not a signed note, or a body that is not
	// exactly origin, size and root lines as this log writes them.
	ErrMalformedCheckpoint = errors.New("tlog: malformed checkpoint")
	// ErrUnknownKey: no signature on the note is from a known key.
	ErrUnknownKey = errors.New("tlog: checkpoint not signed by a known key")
	// ErrBadSignature: a known key's signature does not verify.
	ErrBadSignature = errors.New("tlog: checkpoint signature does not verify")
	// ErrWrongOrigin: the checkpoint is of another log.
	ErrWrongOrigin = errors.New("tlog: checkpoint is for another log")
)

// ErrBadKey reports a signer or verifier key string that does not parse
// as an Ed25519 signed-note key.
var ErrBadKey = errors.New("tlog: invalid signed-note key")

// Signer signs checkpoints with the current key and knows the verifier
// keys of the current and previous keys. It is safe for concurrent use.
type Signer struct {
	signer   note.Signer
	name     string
	vkey     string
	verifier *Verifier
}

// NewSigner returns a Signer for a note signer key
// ("PRIVATE+KEY+name+hash+base64", Ed25519 as note.GenerateKey writes it);
// previous are verifier keys of retired keys whose checkpoints must still
// verify.
func NewSigner(skey string, previous ...string) (*Signer, error) {
	s, err := note.NewSigner(skey)
	if err != nil {
		return nil, fmt.Errorf("%w: signer key: %v", ErrBadKey, err)
	}
	pub, err := signerPublicKey(skey)
	if err != nil {
		return nil, err
	}
	vkey, err := note.NewEd25519VerifierKey(s.Name(), pub)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadKey, err)
	}
	v, err := NewVerifier(append([]string{vkey}, previous...)...)
	if err != nil {
		return nil, err
	}
	return &Signer{signer: s, name: s.Name(), vkey: vkey, verifier: v}, nil
}

// signerPublicKey derives the Ed25519 public key of a note signer key,
// which note.Signer does not expose.
func signerPublicKey(skey string) (ed25519.PublicKey, error) {
	// PRIVATE+KEY+name+hash+base64: the base64 key may itself hold "+".
	rest, ok := strings.CutPrefix(skey, "PRIVATE+KEY+")
	_, rest, ok1 := strings.Cut(rest, "+")
	_, key, ok2 := strings.Cut(rest, "+")
	if !ok || !ok1 || !ok2 {
		return nil, fmt.Errorf("%w: malformed signer key", ErrBadKey)
	}
	raw, err := base64.StdEncoding.DecodeString(key)
	if err != nil || len(raw) != 1+ed25519.SeedSize || raw[0] != 1 {
		return nil, fmt.Errorf("%w: signer key is not an Ed25519 key", ErrBadKey)
	}
	return ed25519.NewKeyFromSeed(raw[1:]).Public().(ed25519.PublicKey), nil
}

// Name returns the key name (KeyName for keys Toolgate creates).
func (s *Signer) Name() string { return s.name }

// VerifierKey returns the current key's verifier key, "name+hash+base64key"
// as note.NewVerifier reads it: what GET /v1/audit/checkpoint/verifier
// serves.
func (s *Signer) VerifierKey() string { return s.vkey }

// Verifier returns a Verifier that accepts checkpoints signed by the
// current key or any previous key.
func (s *Signer) Verifier() *Verifier { return s.verifier }

// Sign returns cp as a signed note: the checkpoint body, a blank line and
// one signature line.
func (s *Signer) Sign(cp Checkpoint) ([]byte, error) {
	if err := checkOrigin(cp.Origin); err != nil {
		return nil, err
	}
	if len(cp.Root) != HashSize {
		return nil, fmt.Errorf("tlog: checkpoint root is %d bytes, want %d", len(cp.Root), HashSize)
	}
	body := log.Checkpoint{Origin: cp.Origin, Size: cp.Size, Hash: cp.Root}
	msg, err := note.Sign(&note.Note{Text: string(body.Marshal())}, s.signer)
	if err != nil {
		return nil, fmt.Errorf("tlog: signing checkpoint: %w", err)
	}
	return msg, nil
}

// checkOrigin rejects origins a signed note cannot carry on one line.
func checkOrigin(origin string) error {
	if origin == "" || !utf8.ValidString(origin) {
		return fmt.Errorf("tlog: checkpoint origin %q is empty or not UTF-8", origin)
	}
	for _, r := range origin {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("tlog: checkpoint origin %q has a control character", origin)
		}
	}
	return nil
}

// Verifier opens checkpoints signed by any of a set of keys. It is safe
// for concurrent use.
type Verifier struct {
	keys []string
	list note.Verifiers
}

// NewVerifier returns a Verifier for verifier keys ("name+hash+base64key").
// Duplicates are dropped; there must be at least one key, and no two
// different keys with one name and key hash.
func NewVerifier(keys ...string) (*Verifier, error) {
	v := &Verifier{}
	seen := map[string]bool{}
	ids := map[string]bool{}
	var vs []note.Verifier
	for _, k := range keys {
		k = strings.TrimSpace(k)
		if seen[k] {
			continue
		}
		nv, err := note.NewVerifier(k)
		if err != nil {
			return nil, fmt.Errorf("%w: verifier key %q: %v", ErrBadKey, k, err)
		}
		// Signatures name their key by name and 4-byte hash only.
		if ids[keyID(k)] {
			return nil, fmt.Errorf("%w: two keys named %s", ErrBadKey, keyID(k))
		}
		seen[k] = true
		ids[keyID(k)] = true
		v.keys = append(v.keys, k)
		vs = append(vs, nv)
	}
	if len(vs) == 0 {
		return nil, fmt.Errorf("%w: no verifier keys", ErrBadKey)
	}
	v.list = note.VerifierList(vs...)
	return v, nil
}

// Keys returns the verifier keys, in the order given (for a Signer's
// Verifier: the current key first).
func (v *Verifier) Keys() []string {
	return append([]string(nil), v.keys...)
}

// Open verifies a signed checkpoint note and returns its checkpoint. It
// fails with ErrMalformedCheckpoint, ErrUnknownKey, ErrBadSignature or
// ErrWrongOrigin (wrapped) unless msg is a well-formed note, signed by one
// of v's keys, whose body is exactly a checkpoint of origin with a
// 32-byte root. Signatures by other keys (witnesses) are ignored.
func (v *Verifier) Open(msg []byte, origin string) (Checkpoint, error) {
	n, err := note.Open(msg, v.list)
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		switch {
		case errors.As(err, &unverified):
			return Checkpoint{}, fmt.Errorf("%w: signed by %s", ErrUnknownKey, sigNames(unverified.Note.UnverifiedSigs))
		case errors.As(err, &invalid):
			return Checkpoint{}, fmt.Errorf("%w: key %s+%08x", ErrBadSignature, invalid.Name, invalid.Hash)
		default:
			return Checkpoint{}, fmt.Errorf("%w: %v", ErrMalformedCheckpoint, err)
		}
	}
	var body log.Checkpoint
	rest, err := body.Unmarshal([]byte(n.Text))
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%w: %v", ErrMalformedCheckpoint, err)
	}
	// This log writes no extension lines and only canonical numbers and
	// base64: anything else was not written by it.
	if len(rest) != 0 {
		return Checkpoint{}, fmt.Errorf("%w: unexpected extension lines", ErrMalformedCheckpoint)
	}
	if !bytes.Equal(body.Marshal(), []byte(n.Text)) {
		return Checkpoint{}, fmt.Errorf("%w: body is not in canonical form", ErrMalformedCheckpoint)
	}
	if len(body.Hash) != HashSize {
		return Checkpoint{}, fmt.Errorf("%w: root is %d bytes, want %d", ErrMalformedCheckpoint, len(body.Hash), HashSize)
	}
	if body.Origin != origin {
		return Checkpoint{}, fmt.Errorf("%w: origin %q, want %q", ErrWrongOrigin, body.Origin, origin)
	}
	return Checkpoint{Origin: body.Origin, Size: body.Size, Root: body.Hash}, nil
}

// sigNames lists signatures as "name+hash" for an error message.
func sigNames(sigs []note.Signature) string {
	if len(sigs) == 0 {
		return "no key"
	}
	names := make([]string, len(sigs))
	for i, s := range sigs {
		names[i] = fmt.Sprintf("%s+%08x", s.Name, s.Hash)
	}
	return strings.Join(names, ", ")
}
