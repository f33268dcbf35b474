package api

import (
	"errors"
	"fmt"
	"net/http"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/pipeline"
)

// CodeUnfinished (409): the call_id names a call whose first request never
// finished (the gateway that ran it stopped); the message says whether it
// may have run, and call_id and decision_id name its audit events.
const CodeUnfinished = apiv1.CodeUnfinished

// keyFailure maps a request stopped by its call_id as an idempotency key
// (pipeline.IsKeyError) to its status and error; ok is false for any
// other error. at prefixes the message ("calls[2]: " in a batch). Nothing
// was decided or run for the request.
func keyFailure(err error, at string) (status int, d errorDetail, retryAfter, ok bool) {
	var u *pipeline.UnfinishedError
	switch {
	case errors.Is(err, pipeline.ErrKeyConflict):
		return http.StatusConflict, errorDetail{Code: CodeConflict, Message: at + "call_id was already used by another request " +
			"(another tool, other arguments, another session or principal, or a call where this is a decision or the reverse); " +
			"nothing was run: a new call needs a new call_id"}, false, true
	case errors.As(err, &u):
		msg := "call_id names a call that did not finish (the gateway that ran it stopped); it stopped before it was allowed, so nothing ran"
		if u.Started {
			msg = "call_id names a call that did not finish (the gateway that ran it stopped); its allow decision was committed, so the tool may have run: see the audit events of its decision_id"
			if u.Outcome != "" && u.Outcome != apiv1.OutcomeAllow {
				msg += " (the last of them says " + string(u.Outcome) + ")"
			}
		}
		return http.StatusConflict, errorDetail{Code: CodeUnfinished, Message: at + msg + "; nothing was run now: a new attempt needs a new call_id",
			CallID: u.CallID, DecisionID: u.DecisionID}, false, true
	case errors.Is(err, pipeline.ErrKeyWait):
		return http.StatusServiceUnavailable, errorDetail{Code: CodeUnavailable,
			Message: at + "the first request with this call_id is still running; retry with the same call_id to get its response"}, true, true
	}
	return 0, errorDetail{}, false, false
}

// writeKeyError writes a keyFailure and reports whether err was one.
func writeKeyError(w http.ResponseWriter, err error, at string) bool {
	status, d, retry, ok := keyFailure(err, at)
	if !ok {
		return false
	}
	if retry {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, errorBody{Error: d})
	return true
}

// batchAt names the call of a batch in a message.
func batchAt(i int) string { return fmt.Sprintf("calls[%d]: ", i) }
