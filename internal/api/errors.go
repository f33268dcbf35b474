package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/pipeline"
	"github.com/toolgate/toolgate/internal/ratelimit"
)

// Error codes of the {"error":{"code","message"}} body (CONTRACT §4),
// from the API's wire types.
const (
	CodeUnauthenticated      = apiv1.CodeUnauthenticated
	CodeForbidden            = apiv1.CodeForbidden
	CodeInvalidRequest       = apiv1.CodeInvalidRequest
	CodeNotFound             = apiv1.CodeNotFound
	CodeMethodNotAllowed     = apiv1.CodeMethodNotAllowed
	CodeTooLarge             = apiv1.CodeTooLarge
	CodeUnsupportedMediaType = apiv1.CodeUnsupportedMediaType
	CodeRateLimited          = apiv1.CodeRateLimited
	CodeUnavailable          = apiv1.CodeUnavailable
	CodeInternal             = apiv1.CodeInternal
	// CodePermanentFailure (424): the tool ran and declared a permanent
	// failure; the platform should end the run rather than retry.
	CodePermanentFailure = apiv1.CodePermanentFailure
)

type (
	errorBody   = apiv1.ErrorBody
	errorDetail = apiv1.ErrorDetail
)

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
	if writeKeyError(w, err, "") {
		return
	}
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
