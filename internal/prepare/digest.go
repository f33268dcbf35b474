package prepare

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Digest returns "sha256:" + hex of the RFC 8785 canonical JSON of v. The
// request digest is Digest of the document without its "digest" member.
func Digest(v any) (string, error) {
	b, err := canonical(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

func canonical(v any) ([]byte, error) {
	b, err := json.Marshal(v, json.Deterministic(true))
	if err != nil {
		return nil, err
	}
	raw := jsontext.Value(b)
	if err := raw.Canonicalize(); err != nil {
		return nil, err
	}
	return raw, nil
}
