package prepare

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"

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
// call. Both come from one canonicalization: the document is written
// without call_id, member by member in RFC 8785 order, remembering where
// call_id sorts; the digest hashes the same bytes with the call_id member
// in that place. doc must not hold "digest"; it is not modified.
func digestAndKey(doc map[string]any) (digest string, key [32]byte, err error) {
	callID, ok := doc["call_id"].(string)
	if !ok {
		return "", key, errors.New("document has no call_id")
	}
	var buf [16]string
	names := buf[:0]
	for k := range doc {
		if k != "call_id" {
			names = append(names, k)
		}
	}
	slices.SortFunc(names, canonicalpkg.Compare)
	b := make([]byte, 0, 1024)
	b = append(b, '{')
	at := -1 // where the first member after call_id starts
	for i, k := range names {
		if i > 0 {
			b = append(b, ',')
		}
		if at < 0 && canonicalpkg.Less("call_id", k) {
			at = len(b)
		}
		if b, err = canonicalpkg.AppendMember(b, k, doc[k]); err != nil {
			return "", key, err
		}
	}
	b = append(b, '}')
	key = sha256.Sum256(b)

	member, err := canonicalpkg.AppendMember(make([]byte, 0, 64), "call_id", callID)
	if err != nil {
		return "", key, err
	}
	h := sha256.New()
	switch {
	case at >= 0: // before a member: `{…,` member `,` `…}`
		h.Write(b[:at])
		h.Write(member)
		h.Write([]byte{','})
		h.Write(b[at:])
	case len(names) == 0: // the only member
		h.Write([]byte{'{'})
		h.Write(member)
		h.Write([]byte{'}'})
	default: // after the last member
		h.Write(b[:len(b)-1])
		h.Write([]byte{','})
		h.Write(member)
		h.Write([]byte{'}'})
	}
	var sum [32]byte
	return "sha256:" + hex.EncodeToString(h.Sum(sum[:0])), key, nil
}

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
