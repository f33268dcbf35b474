package upstream

// A copy of internal/jwks's check (which internal/auth uses): the SDK
// imports nothing internal. Keep the two in step.

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Errors of checkCompact.
var (
	// errMalformed: the token is not three base64url segments whose first
	// two are each one JSON object with unique member names in valid
	// UTF-8.
	errMalformed = errors.New("malformed token")
	// errCritical: the header has a "crit" parameter. RFC 7515 §4.1.11
	// makes a recipient refuse a token whose crit names an extension it
	// does not understand, and no extension is understood here.
	errCritical = errors.New(`the token's "crit" header names parameters that are not understood`)
)

// checkCompact checks what must hold of a compact JWS before any key is
// looked up for it: three base64url segments; a header and a payload that
// are each exactly one JSON object, strictly decoded (no duplicate member
// names, which encoding/json would resolve silently by keeping the last;
// valid UTF-8; nothing after the object); and no "crit" header parameter.
// The signature segment is left to the verifier.
func checkCompact(token string) error {
	h, rest, ok := strings.Cut(token, ".")
	p, sig, ok2 := strings.Cut(rest, ".")
	if !ok || !ok2 || strings.Contains(sig, ".") {
		return fmt.Errorf("%w: not three dot-separated segments", errMalformed)
	}
	header, err := segment(h, "header")
	if err != nil {
		return err
	}
	if _, err := segment(p, "payload"); err != nil {
		return err
	}
	var hdr struct {
		Crit jsontext.Value `json:"crit"`
	}
	if err := json.Unmarshal(header, &hdr); err != nil {
		return fmt.Errorf("%w: header: %v", errMalformed, err)
	}
	if hdr.Crit != nil {
		var names []string
		if err := json.Unmarshal(hdr.Crit, &names); err != nil || len(names) == 0 {
			return fmt.Errorf("%w: crit must be a non-empty array of names (RFC 7515 §4.1.11)", errCritical)
		}
		return fmt.Errorf("%w: %q", errCritical, names)
	}
	return nil
}

// segment decodes one base64url segment that must hold a JSON object.
func segment(s, name string) ([]byte, error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not base64url", errMalformed, name)
	}
	if err := strictObject(b); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errMalformed, name, err)
	}
	return b, nil
}

// strictObject reports why b is not exactly one JSON object with unique
// member names (at every depth) in valid UTF-8.
func strictObject(b []byte) error {
	d := jsontext.NewDecoder(bytes.NewReader(b))
	if k := d.PeekKind(); k != '{' {
		return errors.New("not a JSON object")
	}
	if err := d.SkipValue(); err != nil {
		return err
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return errors.New("data after the JSON object")
	}
	return nil
}
