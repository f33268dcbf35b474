package audit

import (
	"bytes"
	"errors"

	"github.com/go-json-experiment/json/jsontext"

	apiv1 "github.com/toolgate/toolgate/api/v1"
)

// Leaf versions. An event's leaf in its tenant's tree is the SHA-256 of
// its content (ComputeHash); the leaf version names the rule that makes
// that content from the event's JSON, so that the rule can change one day
// without an old event or a new one being hashed by the wrong rule.
//
//   - Version 1: an event without a "leaf_version" member, everything the
//     log wrote before the member existed.
//   - Version 2: "leaf_version": 2, every event the log writes now. It
//     hashes by the same rule as version 1: the member is one more member
//     of the hashed JSON, so it cannot change without changing the hash,
//     the tree's leaf and every later root.
//
// The tree's hashing (RFC 6962) is unchanged, so databases, checkpoints,
// proofs and exports of before still verify. Every verifier (Verify,
// VerifyExport, ComputeHash, LeafHash, the API's HashOf, the console's
// proof) reads the version first, through one function
// (apiv1.LeafVersionOf), and refuses an unknown or malformed one with
// ErrUnknownLeafVersion naming the event, rather than hash it by a rule
// that may not be its own. Integration does not read it: a replica that
// integrates an event of a newer replica (a rolling upgrade) moves it by
// its stored hash like any other.
const (
	LeafVersion1       = apiv1.LeafVersion1
	LeafVersion2       = apiv1.LeafVersion2
	CurrentLeafVersion = apiv1.CurrentLeafVersion
)

// ErrUnknownLeafVersion: the event's leaf version is one this code does
// not know how to hash (see the leaf versions above).
var ErrUnknownLeafVersion = apiv1.ErrUnknownLeafVersion

// LeafVersionOf returns the leaf version of an event's JSON (1 without a
// "leaf_version" member), or ErrUnknownLeafVersion naming the event.
func LeafVersionOf(raw []byte) (int, error) { return apiv1.LeafVersionOf(raw) }

// LeafHash recomputes an event's hash from its JSON as stored or exported:
// [ComputeHash] of the object without its "log_index" member, which the
// log assigns when it integrates the event into the tenant's Merkle tree,
// after the hash was computed. The 32 bytes behind "sha256:" are the
// event's leaf in that tree. An unknown leaf version fails with
// ErrUnknownLeafVersion.
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
