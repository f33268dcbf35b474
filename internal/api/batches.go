package api

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/service"
)

// DefaultMaxBatchCalls is the default of Options.MaxBatchCalls.
const DefaultMaxBatchCalls = 32

// batchEnvelope is the body of POST /v1/batches and /v1/batches/decisions.
type batchEnvelope struct {
	SessionID string
	Calls     []service.BatchCall
}

// batchErrorBody answers a batch that failed: the error, as a single call
// would have met it, plus what became of each call (some may have
// finished, some may have been running). Its entries are
// apiv1.CallResponse, DecisionResponse or BatchFailure values; clients
// decode the whole as apiv1.BatchResponse.
type batchErrorBody struct {
	Error   errorDetail `json:"error"`
	Results []any       `json:"results,omitempty"`
}

// batchResults is a batch's 200 answer (apiv1.BatchResponse without
// error).
type batchResults struct {
	Results []any `json:"results"`
}

func (s *Server) callBatch(w http.ResponseWriter, r *http.Request)   { s.batch(w, r, true) }
func (s *Server) decideBatch(w http.ResponseWriter, r *http.Request) { s.batch(w, r, false) }

func (s *Server) batch(w http.ResponseWriter, r *http.Request, run bool) {
	body, rerr := readBody(w, r, s.o.MaxBodyBytes)
	var env batchEnvelope
	if rerr == nil {
		env, rerr = decodeBatchEnvelope(body, s.o.MaxBatchCalls)
	}
	if rerr != nil {
		s.o.Logger.Info("rejected batch envelope", "path", r.URL.Path, "tenant", caller(r).Tenant, "principal", caller(r).Principal, "err", rerr.Message)
		writeError(w, rerr)
		return
	}
	out, err := s.o.Calls.Batch(r.Context(), service.BatchRequest{
		Identity: caller(r), SessionID: env.SessionID, Calls: env.Calls,
	}, run)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, batchResults{Results: out.Results})
	case out.Results == nil:
		writeError(w, err) // a call_id stopped the batch before any call was decided
	default:
		// The batch answers with the initiating failure's status, never
		// with a sibling's cancellation.
		e := service.As(err)
		writeErrorBody(w, e, batchErrorBody{Error: detailOf(e), Results: out.Results})
	}
}

// decodeBatchEnvelope decodes a batch body once, strictly: an object with
// the members "session_id" (optional) and "calls", a non-empty array of at
// most max call objects, each with "tool" (required), "arguments" and
// "call_id" (optional, unique within the batch). As for single calls the
// arguments are kept raw for prepare, and anything else is a 400 that names
// the offending entry.
func decodeBatchEnvelope(body []byte, max int) (batchEnvelope, *requestError) {
	var env batchEnvelope
	seenCalls := false
	rerr := readObject(body, "body", func(name string, val jsontext.Value) *requestError {
		switch name {
		case "session_id":
			s, rerr := idValue(name, val)
			env.SessionID = s
			return rerr
		case "calls":
			seenCalls = true
			calls, rerr := decodeCalls(val, max)
			env.Calls = calls
			return rerr
		}
		return badRequest("unknown member %q (identity comes only from the credential)", truncate(name, 64))
	})
	if rerr != nil {
		return env, rerr
	}
	if !seenCalls {
		return env, badRequest("calls is required")
	}
	return env, nil
}

func decodeCalls(val jsontext.Value, max int) ([]service.BatchCall, *requestError) {
	if val.Kind() != '[' {
		return nil, badRequest("calls must be an array of call objects")
	}
	dec := jsontext.NewDecoder(bytes.NewReader(val), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if _, err := dec.ReadToken(); err != nil {
		return nil, badRequest("body is not valid JSON")
	}
	var calls []service.BatchCall
	for dec.PeekKind() != ']' {
		i := len(calls)
		if i == max {
			return nil, badRequest("calls has more than %d entries; a batch holds at most %d calls", max, max)
		}
		item, err := dec.ReadValue()
		if err != nil {
			return nil, badRequest("body is not valid JSON")
		}
		c, rerr := decodeBatchCall(item, i)
		if rerr != nil {
			return nil, rerr
		}
		calls = append(calls, c)
	}
	return calls, nil
}

func decodeBatchCall(item jsontext.Value, i int) (service.BatchCall, *requestError) {
	var c service.BatchCall
	at := fmt.Sprintf("calls[%d]", i)
	if item.Kind() != '{' {
		return c, badRequest("%s must be a call object", at)
	}
	hasTool := false
	rerr := readObject(item, at, func(name string, val jsontext.Value) *requestError {
		switch name {
		case "tool":
			hasTool = true
			tool, rerr := stringValue(at+".tool", val)
			c.Tool = tool
			return rerr
		case "arguments":
			c.Arguments = bytes.Clone(val)
			return nil
		case "call_id":
			id, rerr := idValue(at+".call_id", val)
			c.CallID = id
			return rerr
		}
		return badRequest("%s has unknown member %q", at, truncate(name, 64))
	})
	if rerr == nil && !hasTool {
		rerr = badRequest("%s.tool is required", at)
	}
	return c, rerr
}

// readObject walks the members of the JSON object in data, calling fn with
// each name and raw value. Member names must be unique valid UTF-8; values
// are handed over undecoded (the arguments stay the model's, for prepare).
func readObject(data []byte, what string, fn func(name string, val jsontext.Value) *requestError) *requestError {
	dec := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	tok, err := dec.ReadToken()
	if err != nil {
		return badRequest("body is not valid JSON")
	}
	if tok.Kind() != '{' {
		return badRequest("%s must be a JSON object", what)
	}
	seen := map[string]bool{}
	for dec.PeekKind() == '"' {
		nameTok, err := dec.ReadToken()
		if err != nil {
			return badRequest("body is not valid JSON")
		}
		name := nameTok.String()
		if !utf8.ValidString(name) {
			return badRequest("%s has a member name that is not valid UTF-8", what)
		}
		if seen[name] {
			return badRequest("%s has duplicate member %q", what, truncate(name, 64))
		}
		seen[name] = true
		val, err := dec.ReadValue()
		if err != nil {
			return badRequest("body is not valid JSON")
		}
		if rerr := fn(name, val); rerr != nil {
			return rerr
		}
	}
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '}' {
		return badRequest("body is not valid JSON")
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return badRequest("unexpected data after the JSON object")
	}
	return nil
}

// stringValue decodes a required JSON string.
func stringValue(name string, val jsontext.Value) (string, *requestError) {
	if val.Kind() != '"' {
		return "", badRequest("%s must be a string", name)
	}
	if !utf8.Valid(val) {
		return "", badRequest("%s is not valid UTF-8", name)
	}
	tok, err := jsontext.NewDecoder(bytes.NewReader(val)).ReadToken()
	if err != nil {
		return "", badRequest("%s is not a valid JSON string", name)
	}
	return tok.String(), nil
}
