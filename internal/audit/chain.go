package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// HashPrefix starts every event hash.
const HashPrefix = "sha256:"

// ComputeHash recomputes the hash of an event from its JSON (as stored,
// as the API returns it, or a line of an ndjson export). Auditors can
// reproduce it with any RFC 8785 implementation:
//
//	hash = "sha256:" + hex(sha256(C))
//
// where C is the RFC 8785 canonical JSON (JCS) of the event's JSON object
// with its "hash" and "log_index" members removed (log_index is assigned
// after the event was hashed). Every other member takes part, "chain",
// "seq" and "prev_hash" included. Events of the hash-chain era commit to
// their predecessor that way (seq from 1, prev_hash of the first ""); events
// written since carry chain "", seq 0 and prev_hash "", and the tenant's
// Merkle tree commits to their order: its leaf for an event is the 32 bytes
// of this SHA-256. The raw JSON a Store keeps is the canonical JSON of the
// full event, "hash" included, "log_index" never.
//
// ComputeHash ignores the values of existing "hash" and "log_index"
// members; it fails when raw is not a JSON object, and with
// ErrUnknownLeafVersion when the event's leaf version (LeafVersionOf) is
// one this code does not know how to hash.
func ComputeHash(raw []byte) (string, error) {
	if _, err := LeafVersionOf(raw); err != nil {
		return "", err
	}
	content, _, _, err := splitHash(raw)
	if err != nil {
		return "", err
	}
	return hashOf(content), nil
}

// HashBytes returns the 32 raw bytes of an event hash ("sha256:" + 64 hex
// digits): the event's entry in its tenant's Merkle tree.
func HashBytes(hash string) ([]byte, error) {
	hexed, ok := strings.CutPrefix(hash, HashPrefix)
	if !ok || len(hexed) != 2*sha256.Size {
		return nil, errors.New("audit: not a sha256 event hash")
	}
	b, err := hex.DecodeString(hexed)
	if err != nil {
		return nil, errors.New("audit: not a sha256 event hash")
	}
	return b, nil
}

// hashOf hashes canonical content.
func hashOf(content []byte) string {
	sum := sha256.Sum256(content)
	return HashPrefix + hex.EncodeToString(sum[:])
}

// splitHash returns the canonical JSON of the object raw without its "hash"
// and "log_index" members, the hash member's string value ("" when absent),
// and whether a log_index member was present.
func splitHash(raw []byte) ([]byte, string, bool, error) {
	var hash string
	var hasIndex bool
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, "", false, errors.New("audit: stored event is not a JSON object")
	}
	var buf bytes.Buffer
	enc := jsontext.NewEncoder(&buf)
	if err := enc.WriteToken(jsontext.BeginObject); err != nil {
		return nil, "", false, err
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, "", false, fmt.Errorf("audit: stored event: %w", err)
		}
		name := tok.String() // the token is only valid until the next read
		val, err := dec.ReadValue()
		if err != nil {
			return nil, "", false, fmt.Errorf("audit: stored event: %w", err)
		}
		if name == "log_index" {
			hasIndex = true
			continue
		}
		if name == "hash" {
			if val.Kind() != '"' {
				return nil, "", false, errors.New("audit: stored event hash is not a string")
			}
			var s string
			if err := json.Unmarshal(val, &s); err != nil {
				return nil, "", false, err
			}
			hash = s
			continue
		}
		if err := enc.WriteToken(jsontext.String(name)); err != nil {
			return nil, "", false, err
		}
		if err := enc.WriteValue(val); err != nil {
			return nil, "", false, err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, "", false, fmt.Errorf("audit: stored event: %w", err)
	}
	if _, err := dec.ReadToken(); err == nil {
		return nil, "", false, errors.New("audit: stored event has trailing data")
	}
	if err := enc.WriteToken(jsontext.EndObject); err != nil {
		return nil, "", false, err
	}
	v := jsontext.Value(bytes.TrimSpace(buf.Bytes()))
	if err := v.Canonicalize(); err != nil {
		return nil, "", false, err
	}
	return v, hash, hasIndex, nil
}

// template is an event's canonical JSON with its chain link left open:
// "hash":"", "prev_hash":"" and "seq":0 hold places link fills. Events of
// the tree era are linked with seq 0 and prev_hash "" in the appending
// goroutine, so the single writer only inserts and never becomes the
// bottleneck of group commit; tests link hash-chain-era events with it.
type template struct {
	b        []byte
	hashName int // offset of the "hash" member's name
	hashVal  int // offset of its value `""`, followed by a comma
	prevVal  int // offset of the prev_hash value `""`
	seqVal   int // offset of the seq value `0`
}

// newTemplate encodes ev, whose Seq must be 0 and PrevHash and Hash empty.
// The one-pass writer knows where it put the link members, so nothing is
// parsed back.
func newTemplate(ev *Event) (template, error) {
	return newTemplateInto(make([]byte, 0, 2048), ev)
}

// templateBufs recycle the hot path's encoding buffers: the template is
// garbage once linked (raw is a copy of exactly the right size), and 2 KB
// of garbage per event was a tenth of the append's CPU in GC.
var templateBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// newTemplateInto is newTemplate encoding into buf.
func newTemplateInto(buf []byte, ev *Event) (template, error) {
	if ev.Seq != 0 || ev.PrevHash != "" || ev.Hash != "" {
		return template{}, errors.New("audit: template has a chain link already")
	}
	b, at, err := canonicalEventInto(buf, ev)
	if err != nil {
		return template{}, err
	}
	t := template{b: b, hashName: at.hashName, hashVal: at.hashVal, prevVal: at.prevVal, seqVal: at.seqVal}
	// Member order is fixed: hash < prev_hash < seq, and "id" always
	// follows "hash", so the hash member ends with a comma.
	if string(b[t.hashName:t.hashVal]) != `"hash":` || string(b[t.hashVal:t.hashVal+3]) != `"",` ||
		string(b[t.prevVal:t.prevVal+2]) != `""` || b[t.seqVal] != '0' {
		return template{}, errors.New("audit: unexpected event layout")
	}
	return t, nil
}

// link fills in the chain link and returns the raw JSON to store and the
// event's hash (see ComputeHash).
func (t *template) link(seq int64, prevHash string) (raw []byte, hash string) {
	if seq == 0 && prevHash == "" {
		return t.unlinked()
	}
	b := t.b
	c := make([]byte, 0, len(b)+len(prevHash)+20)
	c = append(c, b[:t.hashName]...)
	c = append(c, b[t.hashVal+3:t.prevVal]...) // drop `"hash":"",`
	c, _ = jsontext.AppendQuote(c, prevHash)   // our own hashes: valid UTF-8
	c = append(c, b[t.prevVal+2:t.seqVal]...)
	c = strconv.AppendInt(c, seq, 10) // < 2^53: the JCS form of an integer
	c = append(c, b[t.seqVal+1:]...)
	hash = hashOf(c)

	raw = make([]byte, 0, len(c)+len(hash)+10)
	raw = append(raw, c[:t.hashName]...)
	raw = append(raw, `"hash":`...)
	raw, _ = jsontext.AppendQuote(raw, hash)
	raw = append(raw, ',')
	raw = append(raw, c[t.hashName:]...)
	return raw, hash
}

// unlinked is link(0, ""), the tree era's event: the template is already
// the content but for its `"hash":""` member, so it is hashed in two
// pieces and copied once.
func (t *template) unlinked() (raw []byte, hash string) {
	b := t.b
	h := sha256.New()
	h.Write(b[:t.hashName])
	h.Write(b[t.hashVal+3:]) // drop `"hash":"",`
	var sum [sha256.Size]byte
	var hexed [len(HashPrefix) + 2*sha256.Size]byte
	copy(hexed[:], HashPrefix)
	hex.Encode(hexed[len(HashPrefix):], h.Sum(sum[:0]))
	hash = string(hexed[:])
	raw = make([]byte, 0, len(b)+len(hash))
	raw = append(raw, b[:t.hashVal+1]...) // through the opening quote
	raw = append(raw, hash...)            // hex: nothing to escape
	raw = append(raw, b[t.hashVal+1:]...)
	return raw, hash
}
