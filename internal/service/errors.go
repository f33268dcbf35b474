package service

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/pipeline"
)

// Kind classifies a failure that is not a tool result. Each kind has one
// HTTP status and error code (the {"error":{"code","message"}} body of the
// REST API) and one JSON-RPC error code (the MCP front door), in the table
// below and nowhere else.
type Kind uint8

// The kinds. KindInternal is the zero value: an error of unknown kind is
// an internal error.
const (
	KindInternal             Kind = iota // 500 internal
	KindInvalid                          // 400 invalid_request: the envelope, not the arguments
	KindUnauthenticated                  // 401 unauthenticated
	KindForbidden                        // 403 forbidden: a management role or the approver policy
	KindNotFound                         // 404 not_found
	KindMethodNotAllowed                 // 405 method_not_allowed (REST only)
	KindConflict                         // 409 conflict: decided, answered, or a call_id reused
	KindUnfinished                       // 409 unfinished: a call_id whose first request never finished
	KindTooLarge                         // 413 too_large
	KindUnsupportedMediaType             // 415 unsupported_media_type (REST only)
	KindPermanent                        // 424 permanent_failure: the tool ran and said retrying cannot help
	KindRateLimited                      // 429 rate_limited
	KindUnavailable                      // 503 unavailable: the gateway fails closed
	numKinds
)

// kinds is the one table of error kinds. The JSON-RPC codes of the MCP
// front door: the protocol's own for invalid params (-32602) and internal
// errors (-32603); for the others, in the implementation-defined server
// error range, -32000 minus the last two digits of the HTTP status for
// 4xx, and -32050 minus them for 5xx.
var kinds = [numKinds]struct {
	status int
	code   string
	rpc    int64
}{
	KindInternal:             {http.StatusInternalServerError, apiv1.CodeInternal, -32603},
	KindInvalid:              {http.StatusBadRequest, apiv1.CodeInvalidRequest, -32602},
	KindUnauthenticated:      {http.StatusUnauthorized, apiv1.CodeUnauthenticated, -32001},
	KindForbidden:            {http.StatusForbidden, apiv1.CodeForbidden, -32003},
	KindNotFound:             {http.StatusNotFound, apiv1.CodeNotFound, -32004},
	KindMethodNotAllowed:     {http.StatusMethodNotAllowed, apiv1.CodeMethodNotAllowed, -32005},
	KindConflict:             {http.StatusConflict, apiv1.CodeConflict, -32009},
	KindUnfinished:           {http.StatusConflict, apiv1.CodeUnfinished, -32009},
	KindTooLarge:             {http.StatusRequestEntityTooLarge, apiv1.CodeTooLarge, -32013},
	KindUnsupportedMediaType: {http.StatusUnsupportedMediaType, apiv1.CodeUnsupportedMediaType, -32015},
	KindPermanent:            {http.StatusFailedDependency, apiv1.CodePermanentFailure, -32024},
	KindRateLimited:          {http.StatusTooManyRequests, apiv1.CodeRateLimited, -32029},
	KindUnavailable:          {http.StatusServiceUnavailable, apiv1.CodeUnavailable, -32053},
}

func (k Kind) row() Kind {
	if k >= numKinds {
		return KindInternal
	}
	return k
}

// HTTPStatus is the kind's HTTP status.
func (k Kind) HTTPStatus() int { return kinds[k.row()].status }

// Code is the kind's error code (apiv1.Code…), the "code" of the REST
// error body.
func (k Kind) Code() string { return kinds[k.row()].code }

// JSONRPCCode is the kind's JSON-RPC error code, for the MCP front door.
func (k Kind) JSONRPCCode() int64 { return kinds[k.row()].rpc }

// String is the kind's code.
func (k Kind) String() string { return k.Code() }

// Error is a failure of a service call that is not a tool result. Message
// is safe for any caller (no internal detail) and is what a front door
// shows; Err is the cause, for logs only. CallID and DecisionID name the
// audited call the failure belongs to, when there is one. RetryAfter,
// when positive, is when to try again (HTTP Retry-After, in whole
// seconds rounded up).
type Error struct {
	Kind       Kind
	Message    string
	CallID     string
	DecisionID string
	RetryAfter time.Duration
	Err        error
}

// Error is the message and, for logs, the cause. Front doors show Message
// alone.
func (e *Error) Error() string {
	if e.Err == nil {
		return e.Message
	}
	return e.Message + ": " + e.Err.Error()
}

// Unwrap is the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf is an Error of kind k whose message is formatted; it has no
// cause.
func Errorf(k Kind, format string, a ...any) *Error {
	return &Error{Kind: k, Message: fmt.Sprintf(format, a...)}
}

// As is err as an *Error: err itself when it is one (or wraps one), else
// an internal error with err as its cause and a message that says
// nothing.
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Kind: KindInternal, Message: "internal error", Err: err}
}

// KindOf is err's kind (KindInternal for an error that is no *Error).
func KindOf(err error) Kind { return As(err).Kind }

// failure maps a pipeline failure that makes the gateway fail closed to
// its kind and a model-safe reason that says what failed, not what
// happened to the call; retry is set when trying again soon may help.
func failure(err error) (k Kind, reason string, retry time.Duration) {
	switch {
	case errors.Is(err, pipeline.ErrPolicy):
		return KindUnavailable, "policy is unavailable", 0
	case errors.Is(err, pipeline.ErrOverloaded):
		return KindUnavailable, "audit log is overloaded", time.Second
	case errors.Is(err, pipeline.ErrAudit):
		return KindUnavailable, "audit log is unavailable", 0
	case errors.Is(err, pipeline.ErrLimits):
		return KindUnavailable, "rate limits cannot be counted", 0
	case errors.Is(err, pipeline.ErrToolPermanent):
		// Only a batch meets it as an error: the call ran.
		return KindPermanent, "the tool reported a permanent failure", 0
	}
	return KindInternal, "internal error", 0
}

// keyError maps a request stopped by its call_id as an idempotency key
// (pipeline.IsKeyError); nil for any other error. at prefixes the message
// ("calls[2]: " in a batch). Nothing was decided or run for the request.
func keyError(err error, at string) *Error {
	var u *pipeline.UnfinishedError
	switch {
	case errors.Is(err, pipeline.ErrKeyConflict):
		return &Error{Kind: KindConflict, Err: err, Message: at + "call_id was already used by another request " +
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
		return &Error{Kind: KindUnfinished, Err: err, Message: at + msg + "; nothing was run now: a new attempt needs a new call_id",
			CallID: u.CallID, DecisionID: u.DecisionID}
	case errors.Is(err, pipeline.ErrKeyWait):
		return &Error{Kind: KindUnavailable, Err: err, RetryAfter: time.Second,
			Message: at + "the first request with this call_id is still running; retry with the same call_id to get its response"}
	}
	return nil
}

// callError maps the failure of a single call, decision or other
// pipeline step: nothing was run.
func callError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
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
		return &Error{Kind: KindRateLimited, Message: msg, RetryAfter: le.RetryAfter, Err: err}
	}
	k, reason, retry := failure(err)
	return &Error{Kind: k, Message: reason + "; nothing was run", RetryAfter: retry, Err: err}
}

// errAuditUnavailable is every audit query that failed on the store's
// side.
func errAuditUnavailable(err error) *Error {
	return &Error{Kind: KindUnavailable, Message: "audit log is unavailable", Err: err}
}
