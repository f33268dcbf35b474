package prepare

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strconv"

	canonicalpkg "github.com/toolgate/toolgate/internal/canonical"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/tools"
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

// AvailabilityKey is PolicyKey of AvailabilityInput(id, sessionID, s), with
// choice as its "choice" member when not nil, written straight from its
// parts: availability is asked on every call and for every tool a caller
// lists, and most answers come from the cache, so the key must not cost a
// document. Its members and their RFC 8785 order are AvailabilityInput's;
// a test holds the two together.
func AvailabilityKey(id *identity.Identity, sessionID string, s *tools.Spec, choice map[string]any) ([32]byte, error) {
	b := make([]byte, 0, 512)
	b = append(b, '{')
	var err error
	if choice != nil {
		if b, err = canonicalpkg.AppendMember(b, "choice", choice); err != nil {
			return [32]byte{}, err
		}
		b = append(b, ',')
	}
	b = append(b, `"client":{"id":`...)
	if b, err = canonicalpkg.AppendString(b, id.Client); err != nil {
		return [32]byte{}, err
	}
	b = append(b, `},"principal":{"claims":`...)
	claims := id.Claims
	if claims == nil {
		claims = map[string]any{}
	}
	if b, err = canonicalpkg.Append(b, claims); err != nil {
		return [32]byte{}, err
	}
	b = append(b, `,"groups":`...)
	if b, err = appendStrings(b, id.Groups); err != nil {
		return [32]byte{}, err
	}
	b = append(b, ',')
	if b, err = canonicalpkg.AppendMember(b, "id", id.Principal); err != nil {
		return [32]byte{}, err
	}
	b = append(b, `,"roles":`...)
	if b, err = appendStrings(b, id.Roles); err != nil {
		return [32]byte{}, err
	}
	b = append(b, "},"...)
	if b, err = canonicalpkg.AppendMember(b, "session_id", sessionID); err != nil {
		return [32]byte{}, err
	}
	b = append(b, ',')
	if b, err = canonicalpkg.AppendMember(b, "tenant", id.Tenant); err != nil {
		return [32]byte{}, err
	}
	b = append(b, `,"tool":`...)
	if b, err = appendToolValue(b, s); err != nil {
		return [32]byte{}, err
	}
	b = append(b, '}')
	return sha256.Sum256(b), nil
}

// appendToolValue writes ToolValue(s) canonically.
func appendToolValue(b []byte, s *tools.Spec) ([]byte, error) {
	a := s.Annotations
	b = append(b, `{"annotations":{"destructive":`...)
	b = strconv.AppendBool(b, a.Destructive)
	b = append(b, `,"idempotent":`...)
	b = strconv.AppendBool(b, a.Idempotent)
	b = append(b, `,"open_world":`...)
	b = strconv.AppendBool(b, a.OpenWorld)
	b = append(b, `,"read_only":`...)
	b = strconv.AppendBool(b, a.ReadOnly)
	b = append(b, `},"annotations_trusted":`...)
	b = strconv.AppendBool(b, !s.AnnotationsUntrusted)
	var err error
	if s.DefinitionDigest != "" {
		b = append(b, ',')
		if b, err = canonicalpkg.AppendMember(b, "definition_digest", s.DefinitionDigest); err != nil {
			return b, err
		}
	}
	b = append(b, `,"effects":`...)
	if b, err = appendStrings(b, s.Effects); err != nil {
		return b, err
	}
	b = append(b, ',')
	if b, err = canonicalpkg.AppendMember(b, "kind", s.Kind); err != nil {
		return b, err
	}
	b = append(b, ',')
	if b, err = canonicalpkg.AppendMember(b, "name", s.Name); err != nil {
		return b, err
	}
	if s.SchemaDigest != "" {
		b = append(b, ',')
		if b, err = canonicalpkg.AppendMember(b, "schema_digest", s.SchemaDigest); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// appendStrings writes ss as a JSON array; nil is [] (as anyStrings makes
// it).
func appendStrings(b []byte, ss []string) ([]byte, error) {
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = canonicalpkg.AppendString(b, s); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}
