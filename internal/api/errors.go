package api

import (
	"net/http"
	"strconv"

	"github.com/go-json-experiment/json"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/ratelimit"
	"github.com/toolgate/toolgate/internal/service"
)

// Error codes of the {"error":{"code","message"}} body (CONTRACT §4),
// from the API's wire types. Which status each goes with is
// service.Kind's table.
const (
	CodeUnauthenticated      = apiv1.CodeUnauthenticated
	CodeForbidden            = apiv1.CodeForbidden
	CodeInvalidRequest       = apiv1.CodeInvalidRequest
	CodeNotFound             = apiv1.CodeNotFound
	CodeMethodNotAllowed     = apiv1.CodeMethodNotAllowed
	CodeConflict             = apiv1.CodeConflict
	CodeUnfinished           = apiv1.CodeUnfinished
	CodeTooLarge             = apiv1.CodeTooLarge
	CodeUnsupportedMediaType = apiv1.CodeUnsupportedMediaType
	CodePermanentFailure     = apiv1.CodePermanentFailure
	CodeRateLimited          = apiv1.CodeRateLimited
	CodeUnavailable          = apiv1.CodeUnavailable
	CodeInternal             = apiv1.CodeInternal
)

type (
	errorBody   = apiv1.ErrorBody
	errorDetail = apiv1.ErrorDetail
)

// writeError writes every failure that is not a tool result, and is the
// only function that does: err's kind (service.Kind; an error that is no
// *service.Error is internal) gives the status and code, its Message the
// message, its CallID and DecisionID the call it belongs to, and its
// RetryAfter the Retry-After header (always present on a 429).
func writeError(w http.ResponseWriter, err error) {
	e := service.As(err)
	writeErrorBody(w, e, errorBody{Error: detailOf(e)})
}

// detailOf is the body's error member for e.
func detailOf(e *service.Error) errorDetail {
	return errorDetail{Code: e.Kind.Code(), Message: e.Message, CallID: e.CallID, DecisionID: e.DecisionID}
}

// writeErrorBody writes body, an error body, with e's status and headers.
func writeErrorBody(w http.ResponseWriter, e *service.Error, body any) {
	if e.RetryAfter > 0 || e.Kind == service.KindRateLimited {
		w.Header().Set("Retry-After", strconv.FormatInt(ratelimit.RetrySeconds(e.RetryAfter), 10))
	}
	writeJSON(w, e.Kind.HTTPStatus(), body)
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
