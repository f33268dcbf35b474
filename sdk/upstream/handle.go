package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/go-json-experiment/json"

	upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
)

// DefaultMaxBodyBytes bounds a request body read by Handle.
const DefaultMaxBodyBytes = 1 << 20

// ToolError is an error the model should read: the gateway shows exactly
// Message. Keep it short and free of internal detail (at most
// upstreamv1.MaxToolErrorBytes, printable).
type ToolError struct{ Message string }

func (e *ToolError) Error() string { return e.Message }

// ErrPermanent marks a failure after which the agent's run should end:
// the gateway answers the platform with HTTP 424 permanent_failure.
var ErrPermanent = errors.New("permanent failure")

// Permanent returns an error wrapping ErrPermanent. detail goes to the
// gateway's audit log, never to the model.
func Permanent(detail string) error { return fmt.Errorf("%w: %s", ErrPermanent, detail) }

// Decode strictly decodes a JSON object into dst: unknown members,
// duplicate names, invalid UTF-8, trailing data and a non-object root are
// errors.
func Decode(body []byte, dst any) error {
	b := bytes.TrimSpace(body)
	if len(b) == 0 || b[0] != '{' {
		return errors.New("arguments must be a JSON object")
	}
	return json.Unmarshal(b, dst, json.RejectUnknownMembers(true))
}

// Func runs one call with verified identity and decoded arguments.
type Func[T any] func(ctx context.Context, id *Identity, args T) (any, error)

// HandlerOption configures Handle.
type HandlerOption func(*handlerConfig)

type handlerConfig struct {
	maxBody int64
	log     *slog.Logger
}

// WithMaxBodyBytes bounds the request body (default DefaultMaxBodyBytes).
func WithMaxBodyBytes(n int64) HandlerOption { return func(c *handlerConfig) { c.maxBody = n } }

// WithLogger logs refused requests and internal errors (default: none).
func WithLogger(l *slog.Logger) HandlerOption { return func(c *handlerConfig) { c.log = l } }

// Handle returns an http.Handler that verifies the assertion against the
// exact body, decodes the arguments into a fresh T with Decode, and calls
// fn. It answers in the shapes the gateway understands:
//
//   - fn's result: 200, a string as a JSON string, anything else as JSON;
//   - *ToolError: 422 {"tool_error": Message};
//   - ErrPermanent: 409 {"permanent": true, "detail": ...};
//   - a bad assertion: 401; undecodable arguments: 400; any other error:
//     500. The gateway shows these as "the tool failed".
func Handle[T any](v *Verifier, fn Func[T], opts ...HandlerOption) http.Handler {
	cfg := handlerConfig{maxBody: DefaultMaxBodyBytes, log: slog.New(slog.DiscardHandler)}
	for _, o := range opts {
		o(&cfg)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, cfg.maxBody))
		if err != nil {
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "request body too large"})
			return
		}
		id, err := v.Verify(r.Context(), r.Header.Get(AssertionHeader), body)
		if err != nil {
			cfg.log.Warn("refused a call without a valid assertion", "err", err)
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthenticated"})
			return
		}
		var args T
		if err := Decode(body, &args); err != nil {
			cfg.log.Warn("arguments do not decode", "call_id", id.CallID, "err", err)
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid arguments"})
			return
		}
		res, err := fn(r.Context(), id, args)
		var te *ToolError
		switch {
		case err == nil:
			writeJSON(w, http.StatusOK, res)
		case errors.As(err, &te):
			writeJSON(w, http.StatusUnprocessableEntity, upstreamv1.ErrorBody{ToolError: &te.Message})
		case errors.Is(err, ErrPermanent):
			permanent, detail := true, err.Error()
			writeJSON(w, http.StatusConflict, upstreamv1.ErrorBody{Permanent: &permanent, Detail: &detail})
		default:
			cfg.log.Error("tool failed", "call_id", id.CallID, "err", err)
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "internal"})
		}
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}
