package v1

// Approval statuses.
const (
	ApprovalPending  = "pending"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	ApprovalExpired  = "expired"
)

// Approval is a call held for a human, as approvers see it (GET
// /v1/approvals/{id}, and the answer of approve and deny): the masked
// request document, never the stored unmasked one.
type Approval struct {
	ID             string         `json:"id"`
	CallID         string         `json:"call_id"`
	DecisionID     string         `json:"decision_id"`
	SessionID      string         `json:"session_id"`
	Tool           string         `json:"tool"`
	Action         string         `json:"action"`
	Principal      string         `json:"principal"`
	Status         string         `json:"status"`            // pending, approved, denied or expired
	Outcome        string         `json:"outcome,omitempty"` // of the run, once approved
	Reasons        []string       `json:"reasons"`
	RequestDigest  string         `json:"request_digest"`
	PolicyRevision string         `json:"policy_revision"`
	Input          map[string]any `json:"input"`
	CreatedAt      string         `json:"created_at"`
	ExpiresAt      string         `json:"expires_at"`
	DecidedBy      string         `json:"decided_by,omitempty"`
	DecidedAt      string         `json:"decided_at,omitempty"`
	Comment        string         `json:"comment,omitempty"`
}

// ApprovalList is the answer of GET /v1/approvals, newest first.
type ApprovalList struct {
	Approvals []Approval `json:"approvals"`
}

// ApprovalStep is the optional body of POST /v1/approvals/{id}/approve
// and /deny.
type ApprovalStep struct {
	Comment string `json:"comment,omitempty"` // at most 1000 bytes
}

// AnswerRequest is the body of POST /v1/questions/{id}/answer.
type AnswerRequest struct {
	Answer string `json:"answer"` // 1 to 4000 bytes; one of the options when the question has some
}

// Question is an ask-user question as its answerer sees it after
// answering.
type Question struct {
	ID         string `json:"id"`
	CallID     string `json:"call_id"`
	Status     string `json:"status"`
	AnsweredBy string `json:"answered_by"`
	AnsweredAt string `json:"answered_at"`
	ExpiresAt  string `json:"expires_at"`
}

// PendingQuestion is an ask-user question waiting for its answer, as
// someone who may answer it sees it (GET /v1/questions): what was asked,
// the options (none: any text answers it), who asked, in which call and
// session, and until when. The request document never leaves the gateway.
type PendingQuestion struct {
	ID             string   `json:"id"`
	CallID         string   `json:"call_id"`
	SessionID      string   `json:"session_id"`
	Tool           string   `json:"tool"`
	Principal      string   `json:"principal"`
	Text           string   `json:"text"`
	Options        []string `json:"options"`
	RequestDigest  string   `json:"request_digest"`
	PolicyRevision string   `json:"policy_revision"`
	CreatedAt      string   `json:"created_at"`
	ExpiresAt      string   `json:"expires_at"`
}

// QuestionList is the answer of GET /v1/questions.
type QuestionList struct {
	Questions []PendingQuestion `json:"questions"`
}
