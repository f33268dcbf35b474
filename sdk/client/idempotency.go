package client

import "errors"

// IsConflict reports whether err is HTTP 409 conflict: for a call, its
// CallID was already used by another request (another tool, other
// arguments, another session or principal); nothing ran. A new call
// needs a new CallID.
//
// A CallID in CallOptions is an idempotency key: retry a Call (or Decide)
// after a network error with the same CallID and the same tool, arguments
// and session, and the gateway answers the response it recorded for the
// first request — same DecisionID, outcome and content — without deciding
// or running anything again, on any replica, for limits.idempotency_ttl
// (default 24h). A retry that arrives while the first request still runs
// waits for it. A call held for approval or waiting for its user answers
// its current state. See docs/http-api.md "Retries and idempotency".
func IsConflict(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == 409 && e.Code == "conflict"
}

// IsUnfinished reports whether err is HTTP 409 unfinished: the CallID
// names a call whose first request never finished (the gateway running it
// stopped). The message says whether it may have run; Error.DecisionID
// names its audit events. Nothing ran now; a new attempt needs a new
// CallID.
func IsUnfinished(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Status == 409 && e.Code == "unfinished"
}
