package service

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
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
