package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"regexp"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// callEnvelope is the body of POST /v1/tools/{name}/calls and /decisions.
type callEnvelope struct {
	Arguments []byte // raw; only prepare decodes it
	SessionID string
	CallID    string
}

// requestError is a 4xx the envelope caused.
type requestError struct {
	status  int
	code    string
	message string
}

func (e *requestError) Error() string { return e.message }

func badRequest(format string, a ...any) *requestError {
	return &requestError{http.StatusBadRequest, CodeInvalidRequest, fmt.Sprintf(format, a...)}
}

var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$`)

// readBody reads a capped body. An oversized body is 413.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, *requestError) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return nil, badRequest("content type must be application/json")
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &requestError{http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("request body exceeds %d bytes", max)}
		}
		return nil, badRequest("could not read the request body")
	}
	return body, nil
}

// decodeCallEnvelope decodes the envelope once, strictly: a JSON object
// with only the members "arguments", "session_id" and "call_id", each at
// most once. The arguments value is kept raw: its duplicate names or
// invalid UTF-8 are the model's mistakes and are reported by prepare as
// invalid_arguments, while anything wrong with the envelope itself —
// including members such as "tenant" or "principal", which are never a
// source of identity — is a 400.
func decodeCallEnvelope(body []byte) (callEnvelope, *requestError) {
	var env callEnvelope
	dec := jsontext.NewDecoder(bytes.NewReader(body),
		jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	tok, err := dec.ReadToken()
	if err != nil {
		return env, badRequest("body is not valid JSON")
	}
	if tok.Kind() != '{' {
		return env, badRequest("body must be a JSON object")
	}
	seen := map[string]bool{}
	for dec.PeekKind() == '"' {
		nameTok, err := dec.ReadToken()
		if err != nil {
			return env, badRequest("body is not valid JSON")
		}
		name := nameTok.String()
		if !utf8.ValidString(name) {
			return env, badRequest("member name is not valid UTF-8")
		}
		if seen[name] {
			return env, badRequest("duplicate member %q", name)
		}
		seen[name] = true
		val, err := dec.ReadValue()
		if err != nil {
			return env, badRequest("body is not valid JSON")
		}
		switch name {
		case "arguments":
			env.Arguments = bytes.Clone(val)
		case "session_id", "call_id":
			s, rerr := idValue(name, val)
			if rerr != nil {
				return env, rerr
			}
			if name == "session_id" {
				env.SessionID = s
			} else {
				env.CallID = s
			}
		default:
			return env, badRequest("unknown member %q (identity comes only from the credential)", truncate(name, 64))
		}
	}
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '}' {
		return env, badRequest("body is not valid JSON")
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return env, badRequest("unexpected data after the JSON object")
	}
	return env, nil
}

// idValue decodes an optional identifier: absent or null means none.
func idValue(name string, val jsontext.Value) (string, *requestError) {
	switch val.Kind() {
	case 'n':
		return "", nil
	case '"':
	default:
		return "", badRequest("%s must be a string", name)
	}
	if !utf8.Valid(val) {
		return "", badRequest("%s is not valid UTF-8", name)
	}
	tok, err := jsontext.NewDecoder(bytes.NewReader(val)).ReadToken()
	if err != nil {
		return "", badRequest("%s is not a valid JSON string", name)
	}
	s := tok.String()
	if s == "" {
		return "", nil
	}
	if !idRE.MatchString(s) {
		return "", badRequest("%s must be 1-128 characters of letters, digits and ._:@- starting with a letter or digit", name)
	}
	return s, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
