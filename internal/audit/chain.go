package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// HashPrefix starts every event hash.
const HashPrefix = "sha256:"

// ComputeHash recomputes the hash of a stored event from its raw JSON.
// Auditors can reproduce it with any RFC 8785 implementation:
//
//	hash = "sha256:" + hex(sha256(C))
//
// where C is the RFC 8785 canonical JSON (JCS) of the event's JSON object
// with its "hash" member removed. Every other member takes part, including
// "chain", "seq" and "prev_hash", so each event commits to its predecessor
// (the chain is by inclusion). The first event of a (tenant, chain) has seq 1
// and prev_hash "". The raw JSON a Store keeps is the canonical JSON of the
// full event, "hash" included.
//
// ComputeHash ignores the value of an existing "hash" member; it fails when
// raw is not a JSON object.
func ComputeHash(raw []byte) (string, error) {
	content, _, err := splitHash(raw)
	if err != nil {
		return "", err
	}
	return hashOf(content), nil
}

// hashOf hashes canonical content.
func hashOf(content []byte) string {
	sum := sha256.Sum256(content)
	return HashPrefix + hex.EncodeToString(sum[:])
}

// splitHash returns the canonical JSON of the object raw without its "hash"
// member, and that member's string value ("" when absent).
func splitHash(raw []byte) (content []byte, hash string, err error) {
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, "", errors.New("audit: stored event is not a JSON object")
	}
	var buf bytes.Buffer
	enc := jsontext.NewEncoder(&buf)
	if err := enc.WriteToken(jsontext.BeginObject); err != nil {
		return nil, "", err
	}
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, "", fmt.Errorf("audit: stored event: %w", err)
		}
		name := tok.String() // the token is only valid until the next read
		val, err := dec.ReadValue()
		if err != nil {
			return nil, "", fmt.Errorf("audit: stored event: %w", err)
		}
		if name == "hash" {
			if val.Kind() != '"' {
				return nil, "", errors.New("audit: stored event hash is not a string")
			}
			var s string
			if err := json.Unmarshal(val, &s); err != nil {
				return nil, "", err
			}
			hash = s
			continue
		}
		if err := enc.WriteToken(jsontext.String(name)); err != nil {
			return nil, "", err
		}
		if err := enc.WriteValue(val); err != nil {
			return nil, "", err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, "", fmt.Errorf("audit: stored event: %w", err)
	}
	if _, err := dec.ReadToken(); err == nil {
		return nil, "", errors.New("audit: stored event has trailing data")
	}
	if err := enc.WriteToken(jsontext.EndObject); err != nil {
		return nil, "", err
	}
	v := jsontext.Value(bytes.TrimSpace(buf.Bytes()))
	if err := v.Canonicalize(); err != nil {
		return nil, "", err
	}
	return v, hash, nil
}

// template is an event's canonical JSON with its chain link left open:
// "hash":"", "prev_hash":"" and "seq":0 hold places the writer fills. The
// expensive part (marshal, canonicalize) happens in the appending goroutine;
// the single writer only splices in the link and hashes, so it never
// becomes the bottleneck of group commit.
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
	if ev.Seq != 0 || ev.PrevHash != "" || ev.Hash != "" {
		return template{}, errors.New("audit: template has a chain link already")
	}
	b, at, err := canonicalEventAt(ev)
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
