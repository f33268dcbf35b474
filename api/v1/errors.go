package v1

// Error codes of the {"error":{"code","message"}} body.
const (
	CodeUnauthenticated      = "unauthenticated"        // 401
	CodeForbidden            = "forbidden"              // 403
	CodeInvalidRequest       = "invalid_request"        // 400
	CodeNotFound             = "not_found"              // 404
	CodeMethodNotAllowed     = "method_not_allowed"     // 405
	CodeConflict             = "conflict"               // 409
	CodeUnfinished           = "unfinished"             // 409: a call_id whose first request never finished
	CodeTooLarge             = "too_large"              // 413
	CodeUnsupportedMediaType = "unsupported_media_type" // 415
	CodePermanentFailure     = "permanent_failure"      // 424
	CodeRateLimited          = "rate_limited"           // 429
	CodeInternal             = "internal"               // 500
	CodeUnavailable          = "unavailable"            // 503
)

// ErrorBody is every failure that is not a tool result.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what failed. Message is safe to show anyone; it never
// carries internal detail.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// CallID and DecisionID name the audited call a failure belongs to
	// (a permanent failure, a batch entry, an unfinished first request
	// with the same call_id).
	CallID     string `json:"call_id,omitempty"`
	DecisionID string `json:"decision_id,omitempty"`
}
