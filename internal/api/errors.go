package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/pipeline"
	"github.com/toolgate/toolgate/internal/ratelimit"
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

// pipelineFailure maps a pipeline failure to its status in one place:
// every dependency failure fails closed with 503, anything else is 500.
// reason is model-safe and says what failed, not what happened to the call.
func pipelineFailure(err error) (status int, code, reason string, retryAfter bool) {
	switch {
	case errors.Is(err, pipeline.ErrPolicy):
		return http.StatusServiceUnavailable, CodeUnavailable, "policy is unavailable", false
	case errors.Is(err, pipeline.ErrOverloaded):
		return http.StatusServiceUnavailable, CodeUnavailable, "audit log is overloaded", true
	case errors.Is(err, pipeline.ErrAudit):
		return http.StatusServiceUnavailable, CodeUnavailable, "audit log is unavailable", false
	case errors.Is(err, pipeline.ErrLimits):
		return http.StatusServiceUnavailable, CodeUnavailable, "rate limits cannot be counted", false
	case errors.Is(err, pipeline.ErrToolPermanent):
		// Only a batch meets it as an error: the call ran.
		return http.StatusFailedDependency, CodePermanentFailure, "the tool reported a permanent failure", false
	}
	return http.StatusInternalServerError, CodeInternal, "internal error", false
}

// writePipelineError writes the failure of a single call or decision.
func writePipelineError(w http.ResponseWriter, err error) {
	var le *pipeline.LimitError
	if errors.As(err, &le) {
		msg := "a limit refused the request; retry after the Retry-After delay"
		if le.Limit == pipeline.LimitLongPolls {
			msg = "too many long polls of this tenant are waiting; retry after the Retry-After delay, or poll without wait"
		}
		writeTooMany(w, le.RetryAfter, errorDetail{Code: CodeRateLimited, Message: msg})
		return
	}
	status, code, reason, retry := pipelineFailure(err)
	if retry {
		w.Header().Set("Retry-After", "1")
	}
	writeError(w, status, code, reason+"; nothing was run")
}

// writeTooMany answers 429 with Retry-After: the whole seconds of retry,
// rounded up, at least 1.
func writeTooMany(w http.ResponseWriter, retry time.Duration, d errorDetail) {
	w.Header().Set("Retry-After", strconv.FormatInt(ratelimit.RetrySeconds(retry), 10))
	writeJSON(w, http.StatusTooManyRequests, errorBody{Error: d})
}

// writeRateLimited answers a call or decision that a limit refused
// (outcome rate_limited): audited, nothing ran; call_id and decision_id
// name its decision event.
func writeRateLimited(w http.ResponseWriter, resp pipeline.Response) {
	writeTooMany(w, resp.RetryAfter, errorDetail{
		Code: CodeRateLimited, Message: "a limit refused the call; nothing was run; retry after the Retry-After delay",
		CallID: resp.CallID, DecisionID: resp.DecisionID,
	})
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
