package backend

import (
	"errors"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/pipeline"
	"github.com/toolgate/toolgate/internal/service"
)

// failure maps a pipeline failure that makes the gateway fail closed to
// its kind and a model-safe reason that says what failed, not what
// happened to the call; retry is set when trying again soon may help.
func failure(err error) (k service.Kind, reason string, retry time.Duration) {
	switch {
	case errors.Is(err, pipeline.ErrPolicy):
		return service.KindUnavailable, "policy is unavailable", 0
	case errors.Is(err, pipeline.ErrOverloaded):
		return service.KindUnavailable, "audit log is overloaded", time.Second
	case errors.Is(err, pipeline.ErrAudit):
		return service.KindUnavailable, "audit log is unavailable", 0
	case errors.Is(err, pipeline.ErrLimits):
		return service.KindUnavailable, "rate limits cannot be counted", 0
	case errors.Is(err, pipeline.ErrToolPermanent):
		// Only a batch meets it as an error: the call ran.
		return service.KindPermanent, "the tool reported a permanent failure", 0
	}
	return service.KindInternal, "internal error", 0
}

// keyError maps a request stopped by its call_id as an idempotency key
// (pipeline.IsKeyError); nil for any other error. at prefixes the message
// ("calls[2]: " in a batch). Nothing was decided or run for the request.
func keyError(err error, at string) *service.Error {
	var u *pipeline.UnfinishedError
	switch {
	case errors.Is(err, pipeline.ErrKeyConflict):
		return &service.Error{Kind: service.KindConflict, Err: err, Message: at + "call_id was already used by another request " +
			"(another tool, other arguments, another session or principal, or a call where this is a decision or the reverse); " +
			"nothing was run: a new call needs a new call_id"}
	case errors.As(err, &u):
		msg := "call_id names a call that did not finish (the gateway that ran it stopped); it stopped before it was allowed, so nothing ran"
		if u.Started {
			msg = "call_id names a call that did not finish (the gateway that ran it stopped); its allow decision was committed, so the tool may have run: see the audit events of its decision_id"
			if u.Outcome != "" && u.Outcome != apiv1.OutcomeAllow {
				msg += " (the last of them says " + string(u.Outcome) + ")"
			}
		}
		return &service.Error{Kind: service.KindUnfinished, Err: err, Message: at + msg + "; nothing was run now: a new attempt needs a new call_id",
			CallID: u.CallID, DecisionID: u.DecisionID}
	case errors.Is(err, pipeline.ErrKeyWait):
		return &service.Error{Kind: service.KindUnavailable, Err: err, RetryAfter: time.Second,
			Message: at + "the first request with this call_id is still running; retry with the same call_id to get its response"}
	}
	return nil
}

// callError maps the failure of a single call, decision or other
// pipeline step: nothing was run.
func callError(err error) *service.Error {
	if err == nil {
		return nil
	}
	var e *service.Error
	if errors.As(err, &e) {
		return e
	}
	if ke := keyError(err, ""); ke != nil {
		return ke
	}
	var le *pipeline.LimitError
	if errors.As(err, &le) {
		msg := "a limit refused the request; retry after the Retry-After delay"
		if le.Limit == pipeline.LimitLongPolls {
			msg = "too many long polls of this tenant are waiting; retry after the Retry-After delay, or poll without wait"
		}
		return &service.Error{Kind: service.KindRateLimited, Message: msg, RetryAfter: le.RetryAfter, Err: err}
	}
	k, reason, retry := failure(err)
	return &service.Error{Kind: k, Message: reason + "; nothing was run", RetryAfter: retry, Err: err}
}

// errAuditUnavailable is every audit query that failed on the store's
// side.
func errAuditUnavailable(err error) *service.Error {
	return &service.Error{Kind: service.KindUnavailable, Message: "audit log is unavailable", Err: err}
}
