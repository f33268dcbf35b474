package api

import (
	"errors"
	"net/http"

	"github.com/go-json-experiment/json"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/pipeline"
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
	status, code, reason, retry := pipelineFailure(err)
	if retry {
		w.Header().Set("Retry-After", "1")
	}
	writeError(w, status, code, reason+"; nothing was run")
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
