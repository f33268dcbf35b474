package audit

import (
	"bytes"
	"errors"

	"github.com/go-json-experiment/json/jsontext"
)

// LeafHash recomputes an event's hash from its JSON as stored or exported:
// [ComputeHash] of the object without its "log_index" member, which the
// log assigns when it integrates the event into the tenant's Merkle tree,
// after the hash was computed. The 32 bytes behind "sha256:" are the
// event's leaf in that tree.
func LeafHash(raw []byte) (string, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return "", errors.New("audit: event is not a JSON object")
	}
	var buf bytes.Buffer
	enc := jsontext.NewEncoder(&buf)
	if err := enc.WriteToken(jsontext.BeginObject); err != nil {
		return "", err
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return "", err
		}
		name := tok.String() // the token is void after the next read
		val, err := dec.ReadValue()
		if err != nil {
			return "", err
		}
		if name == "log_index" {
			continue
		}
		if err := enc.WriteToken(jsontext.String(name)); err != nil {
			return "", err
		}
		if err := enc.WriteValue(val); err != nil {
			return "", err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return "", err
	}
	if err := enc.WriteToken(jsontext.EndObject); err != nil {
		return "", err
	}
	return ComputeHash(buf.Bytes())
}
