package prepare

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"

	canonicalpkg "github.com/toolgate/toolgate/internal/canonical"
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

func canonical(v any) ([]byte, error) { return canonicalpkg.Marshal(v) }

// digestAndKey returns the request digest of doc (Digest of the document
// without "digest") and the policy cache key: the SHA-256 of the canonical
// document without "call_id" as well, the one member that differs on every
// call. Both come from one canonicalization: the key's bytes, with the
// call_id member spliced back in at its canonical place, are exactly the
// digest's bytes. doc must not hold "digest"; it is not modified.
func digestAndKey(doc map[string]any) (digest string, key [32]byte, err error) {
	callID, ok := doc["call_id"].(string)
	if !ok {
		return "", key, errors.New("document has no call_id")
	}
	rest := make(map[string]any, len(doc)-1)
	for k, v := range doc {
		if k != "call_id" {
			rest[k] = v
		}
	}
	b, err := canonical(rest)
	if err != nil {
		return "", key, err
	}
	key = sha256.Sum256(b)
	full, err := withMember(b, "call_id", callID)
	if err != nil {
		return "", key, err
	}
	sum := sha256.Sum256(full)
	return "sha256:" + hex.EncodeToString(sum[:]), key, nil
}

// withMember inserts the string member name:value into the canonical JSON
// object obj at the place RFC 8785 sorts it (by UTF-16 code units of the
// names), keeping the result canonical. obj must not already have name.
func withMember(obj []byte, name, value string) ([]byte, error) {
	member, err := jsontext.AppendQuote(nil, name)
	if err != nil {
		return nil, err
	}
	member = append(member, ':')
	if member, err = jsontext.AppendQuote(member, value); err != nil {
		return nil, err
	}
	dec := jsontext.NewDecoder(bytes.NewReader(obj))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, fmt.Errorf("canonical document is not an object")
	}
	at := int(dec.InputOffset()) // where the new member goes
	first := true
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		if utf16Less(name, tok.String()) {
			break
		}
		if err := dec.SkipValue(); err != nil {
			return nil, err
		}
		at = int(dec.InputOffset())
		first = false
	}
	out := make([]byte, 0, len(obj)+len(member)+1)
	out = append(out, obj[:at]...)
	switch {
	case first && len(obj) > 2: // before the first member
		out = append(out, member...)
		out = append(out, ',')
	case first: // the object was empty
		out = append(out, member...)
	default: // after a member
		out = append(out, ',')
		out = append(out, member...)
	}
	return append(out, obj[at:]...), nil
}

// utf16Less orders member names as RFC 8785 does: by UTF-16 code units.
func utf16Less(a, b string) bool { return canonicalpkg.Less(a, b) }

// PolicyKey returns the decision-cache key of a policy input that has no
// per-call members (the availability input): the SHA-256 of its canonical
// JSON.
func PolicyKey(input map[string]any) ([32]byte, error) {
	b, err := canonical(input)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(b), nil
}
