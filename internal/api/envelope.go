package api

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/service"
)

// callEnvelope is the body of POST /v1/tools/{name}/calls and /decisions.
type callEnvelope struct {
	Arguments []byte // raw; only prepare decodes it
	SessionID string
	CallID    string
}

// requestError is a 4xx the envelope caused.
type requestError = service.Error

func badRequest(format string, a ...any) *requestError {
	return service.Errorf(service.KindInvalid, format, a...)
}

// readBody reads a capped request body, however it is framed
// (Content-Length or chunked). The rules, in order:
//
//   - a Content-Type other than application/json (parameters allowed, but a
//     charset must be utf-8) is 415 unsupported_media_type, before any byte
//     of the body is read;
//   - a body longer than max is 413 too_large, also when it is chunked and
//     no length was announced (the read stops at max+1 bytes);
//   - a non-empty body with no Content-Type at all is 415; an empty body
//     without one is the route's to judge (approve and deny take none).
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, *requestError) {
	ct := r.Header.Get("Content-Type")
	if ct != "" && !isJSONMediaType(ct) {
		return nil, unsupportedMediaType()
	}
	if r.ContentLength > max {
		w.Header().Set("Connection", "close") // the body is never read
		return nil, tooLarge(max)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err != nil {
		return nil, badRequest("could not read the request body")
	}
	if int64(len(body)) > max {
		// Whatever the framing: the connection is closed after the
		// answer, so the rest of the body is never read.
		w.Header().Set("Connection", "close")
		return nil, tooLarge(max)
	}
	if ct == "" && len(body) > 0 {
		return nil, unsupportedMediaType()
	}
	return body, nil
}

// isJSONMediaType reports whether a Content-Type names JSON: the media type
// application/json (case-insensitive), with no charset parameter or
// charset utf-8 (RFC 8259 §8.1: JSON exchanged between systems is UTF-8).
func isJSONMediaType(ct string) bool {
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return false
	}
	cs, ok := params["charset"]
	return !ok || strings.EqualFold(cs, "utf-8")
}

func unsupportedMediaType() *requestError {
	return &requestError{Kind: service.KindUnsupportedMediaType, Message: "the request body must be JSON: send Content-Type: application/json"}
}

func tooLarge(max int64) *requestError {
	return &requestError{Kind: service.KindTooLarge, Message: fmt.Sprintf("request body exceeds %d bytes", max)}
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
	return tok.String(), nil // the service checks its syntax
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
