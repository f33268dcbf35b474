package v1

import "github.com/go-json-experiment/json/jsontext"

// Tool is one tool offered to the caller (GET /v1/tools).
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// InputSchema is a JSON Schema (2020-12), exactly what calls are
	// checked against.
	InputSchema jsontext.Value `json:"input_schema"`
}

// ToolList is the answer of GET /v1/tools.
type ToolList struct {
	Tools []Tool `json:"tools"`
}

// CallRequest is the body of POST /v1/tools/{name}/calls and
// /v1/tools/{name}/decisions. The server never takes identity from it.
type CallRequest struct {
	// Arguments is a JSON object; absent means {}.
	Arguments jsontext.Value `json:"arguments,omitempty"`
	SessionID string         `json:"session_id,omitempty"`
	CallID    string         `json:"call_id,omitempty"`
}

// CallResponse is a call's outcome (200), what the model sees.
type CallResponse struct {
	CallID     string `json:"call_id"`
	DecisionID string `json:"decision_id"`
	// Outcome is ok, tool_error, unavailable, denied, invalid_arguments,
	// approval_required, awaiting_user or (in batches) canceled.
	Outcome Outcome        `json:"outcome"`
	Content string         `json:"content"`
	IsError bool           `json:"is_error"`
	Data    map[string]any `json:"data,omitempty"`
}

// DecisionResponse is a decision without a run (PDP mode).
type DecisionResponse struct {
	CallID     string `json:"call_id"`
	DecisionID string `json:"decision_id"`
	// Outcome is allow, denied, unavailable, invalid_arguments or
	// approval_required.
	Outcome       Outcome `json:"outcome"`
	Content       string  `json:"content"`
	RequestDigest string  `json:"request_digest,omitempty"`
}

// BatchRequest is the body of POST /v1/batches and /v1/batches/decisions.
type BatchRequest struct {
	SessionID string      `json:"session_id,omitempty"`
	Calls     []BatchCall `json:"calls"`
}

// BatchCall is one call of a batch.
type BatchCall struct {
	Tool      string         `json:"tool"`
	Arguments jsontext.Value `json:"arguments,omitempty"`
	CallID    string         `json:"call_id,omitempty"`
}

// BatchFailure is the result entry of the call whose failure canceled its
// batch: no outcome, the error it met.
type BatchFailure struct {
	CallID     string      `json:"call_id"`
	DecisionID string      `json:"decision_id"`
	Error      ErrorDetail `json:"error"`
}

// BatchResult is one entry of a batch answer as a client reads it: a
// CallResponse (POST /v1/batches), a DecisionResponse (…/decisions), or,
// with Error set, a BatchFailure. The server writes each as its own type.
type BatchResult struct {
	CallID        string         `json:"call_id"`
	DecisionID    string         `json:"decision_id"`
	Outcome       Outcome        `json:"outcome,omitempty"`
	Content       string         `json:"content,omitempty"`
	IsError       bool           `json:"is_error,omitempty"`
	Data          map[string]any `json:"data,omitempty"`
	RequestDigest string         `json:"request_digest,omitempty"`
	Error         *ErrorDetail   `json:"error,omitempty"`
}

// BatchResponse is a batch's answer: 200 with Results in request order, or
// the status of the failure that canceled it with Error and (when calls
// were reached) Results.
type BatchResponse struct {
	Error   *ErrorDetail  `json:"error,omitempty"`
	Results []BatchResult `json:"results"`
}

// CallStatus is the answer of GET /v1/calls/{call_id}: a call held for
// approval (ApprovalID) or an ask-user call (QuestionID).
type CallStatus struct {
	CallID     string `json:"call_id"`
	ApprovalID string `json:"approval_id,omitempty"`
	QuestionID string `json:"question_id,omitempty"`
	// Outcome is pending while the call waits; then ok, tool_error,
	// denied or expired.
	Outcome   Outcome `json:"outcome"`
	ExpiresAt string  `json:"expires_at"`
	// Content and IsError are set once the call ran (or was answered).
	Content *string        `json:"content,omitempty"`
	IsError *bool          `json:"is_error,omitempty"`
	Data    map[string]any `json:"data,omitempty"`
}
