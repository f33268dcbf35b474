package service

import (
	"context"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/identity"
)

// ApprovalFilter selects approvals: Status is "" (all) or one of
// apiv1.ApprovalPending, Approved, Denied, Expired; Limit is 1 to
// ApprovalsMaxLimit (0: ApprovalsDefaultLimit).
type ApprovalFilter struct {
	Status string
	Limit  int
}

// ApprovalStep is an approver's approve or deny, with an optional
// comment of at most MaxCommentBytes bytes of UTF-8.
type ApprovalStep struct {
	Identity *identity.Identity // the approver, verified
	ID       string             // the approval id
	Comment  string
}

// AnswerStep is a user's answer to an ask-user question.
type AnswerStep struct {
	Identity *identity.Identity // the answerer, verified
	ID       string             // the question id
	Answer   string
	// Via and MCPRequestID name the front door the answer came through
	// when it is not REST ("mcp", and the JSON-RPC id of the tools/call
	// that carried it), recorded on the answer's audit event.
	Via          string
	MCPRequestID string
}

// QuestionFilter bounds Approvals.Questions: Limit is 1 to
// ApprovalsMaxLimit, ApprovalsDefaultLimit when not positive.
type QuestionFilter struct {
	Limit int
}

// PendingQuestion is an ask-user question waiting for its answer, as
// someone who may answer it sees it (the wire type of GET /v1/questions).
type PendingQuestion = apiv1.PendingQuestion

// The page size of Approvals.Approvals and Questions: the default and
// the most.
const (
	ApprovalsDefaultLimit = 100
	ApprovalsMaxLimit     = 1000
)

// MaxPollWait is the longest a call status request may wait.
const MaxPollWait = 60 * time.Second

// MaxAnswerBytes bounds an answer to an ask-user question: 1 to this many
// bytes of UTF-8, whichever front door brings it.
const MaxAnswerBytes = 4000

// MaxCommentBytes bounds an approver's comment (bytes of UTF-8).
const MaxCommentBytes = 1000

// TextAwaitingUser is the content of an awaiting_user call.
const TextAwaitingUser = "awaiting user"

// AskedQuestion is an ask-user question as its asker's user is to see it,
// for a front door that asks the user itself (MCP elicitation). No REST
// route returns it: the text and options are the caller's own arguments.
type AskedQuestion struct {
	ID     string
	CallID string
	// Status is pending or answered (an expired question is not found).
	Status  string
	Text    string
	Options []string // empty when any answer goes
	// ExpiresAt is when the question expires unanswered.
	ExpiresAt time.Time
}

// Approvals is the human side of held calls and ask-user questions:
// approvers list, read, approve and deny held calls; users answer
// questions; the original caller polls its waiting call.
//
// Approvals, Approval, Approve and Deny need the approver role
// (KindForbidden before anything is read or changed). Answer, Questions,
// CallStatus and CallQuestion need none: the asker may always answer its
// own question, anyone else only when policy lets them (the approver
// policy of the stored request document). An id that is not an id
// (ValidID) names nothing: KindNotFound.
type Approvals interface {
	// Approvals lists the tenant's approvals, newest first. KindInvalid:
	// a status or limit out of range.
	Approvals(ctx context.Context, id *identity.Identity, f ApprovalFilter) ([]apiv1.Approval, error)
	// Approval is one approval (KindNotFound when it is not the tenant's).
	Approval(ctx context.Context, id *identity.Identity, approvalID string) (apiv1.Approval, error)
	// Approve runs the held call as it was decided and answers with the
	// approval as it stands afterwards. KindForbidden: no approver role,
	// or policy does not let this approver decide it; KindConflict:
	// decided or expired; KindInvalid: a comment too long.
	Approve(ctx context.Context, s ApprovalStep) (apiv1.Approval, error)
	// Deny refuses the held call.
	Deny(ctx context.Context, s ApprovalStep) (apiv1.Approval, error)
	// Answer answers an ask-user question. KindNotFound, KindConflict
	// (answered before), KindInvalid (not one of its options, or not 1 to
	// MaxAnswerBytes bytes of UTF-8).
	Answer(ctx context.Context, s AnswerStep) (apiv1.Question, error)
	// Questions lists the tenant's pending ask-user questions that id may
	// answer (its own, and others' that policy lets it answer), newest
	// first. Any other question does not exist for id, as in Answer.
	Questions(ctx context.Context, id *identity.Identity, f QuestionFilter) ([]PendingQuestion, error)
	// CallStatus is what the caller of a held or ask-user call learns of
	// it, waiting up to wait (0 to MaxPollWait, else KindInvalid) while
	// it is pending.
	CallStatus(ctx context.Context, id *identity.Identity, callID string, wait time.Duration) (apiv1.CallStatus, error)
	// CallQuestion is the question of the caller's own ask-user call:
	// only its asker gets it; anyone else, and everyone once it expired,
	// gets KindNotFound.
	CallQuestion(ctx context.Context, id *identity.Identity, callID string) (AskedQuestion, error)
}
