package api

import (
	"errors"
	"net/http"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/pipeline"
)

// Error codes of the {"error":{"code","message"}} body (CONTRACT §4).
const (
	CodeUnauthenticated  = "unauthenticated"
	CodeForbidden        = "forbidden"
	CodeInvalidRequest   = "invalid_request"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeTooLarge         = "too_large"
	CodeRateLimited      = "rate_limited"
	CodeUnavailable      = "unavailable"
	CodeInternal         = "internal"
	// CodePermanentFailure (424): the tool ran and declared a permanent
	// failure; the platform should end the run rather than retry.
	CodePermanentFailure = "permanent_failure"
)

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// CallID and DecisionID name the audited call a permanent failure
	// belongs to.
	CallID     string `json:"call_id,omitempty"`
	DecisionID string `json:"decision_id,omitempty"`
}

// writeError writes a failure that is not a tool result. message must be
// safe for any caller: no internal detail.
func writeError(w http.ResponseWriter, status int, code, message string) {
	writeJSON(w, status, errorBody{Error: errorDetail{Code: code, Message: message}})
}

// writePipelineError maps a pipeline failure to its status in one place:
// every dependency failure fails closed with 503, anything else is 500.
func writePipelineError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, pipeline.ErrPolicy):
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "policy is unavailable; nothing was run")
	case errors.Is(err, pipeline.ErrOverloaded):
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "audit log is overloaded; nothing was run")
	case errors.Is(err, pipeline.ErrAudit):
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "audit log is unavailable; nothing was run")
	default:
		writeError(w, http.StatusInternalServerError, CodeInternal, "internal error; nothing was run")
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
