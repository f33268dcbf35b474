package service

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/approval"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/pipeline"
)

// ApprovalFilter selects approvals (status, limit).
type ApprovalFilter = approval.Filter

// ApprovalStep is an approver's approve or deny, with an optional
// comment.
type ApprovalStep = pipeline.ApprovalStep

// AnswerStep is a user's answer to an ask-user question.
type AnswerStep = pipeline.AnswerStep

// QuestionFilter bounds Approvals.Questions: Limit is 1 to
// ApprovalsMaxLimit, ApprovalsDefaultLimit when not positive.
type QuestionFilter struct {
	Limit int
}

// PendingQuestion is an ask-user question waiting for its answer, as
// someone who may answer it sees it (the wire type of GET /v1/questions).
type PendingQuestion = apiv1.PendingQuestion

// The page size of Approvals.Approvals: the default and the most.
const (
	ApprovalsDefaultLimit = approval.DefaultLimit
	ApprovalsMaxLimit     = approval.MaxLimit
)

// MaxPollWait is the longest a call status request may wait.
const MaxPollWait = pipeline.MaxPollWait

// MaxAnswerBytes bounds an answer to an ask-user question: 1 to this many
// bytes of UTF-8, whichever front door brings it.
const MaxAnswerBytes = 4000

// TextAwaitingUser is the content of an awaiting_user call.
const TextAwaitingUser = pipeline.TextAwaitingUser

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
type Approvals interface {
	// Approvals lists the tenant's approvals, newest first.
	Approvals(ctx context.Context, id *identity.Identity, f ApprovalFilter) ([]apiv1.Approval, error)
	// Approval is one approval (KindNotFound when it is not the tenant's).
	Approval(ctx context.Context, id *identity.Identity, approvalID string) (apiv1.Approval, error)
	// Approve runs the held call as it was decided and answers with the
	// approval as it stands afterwards. KindForbidden: policy does not
	// let this approver decide it; KindConflict: decided or expired.
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
	// it, waiting up to wait (at most MaxPollWait) while it is pending.
	CallStatus(ctx context.Context, id *identity.Identity, callID string, wait time.Duration) (apiv1.CallStatus, error)
	// CallQuestion is the question of the caller's own ask-user call:
	// only its asker gets it; anyone else, and everyone once it expired,
	// gets KindNotFound.
	CallQuestion(ctx context.Context, id *identity.Identity, callID string) (AskedQuestion, error)
}

// NewApprovals is the Approvals service over a pipeline.
func NewApprovals(p *pipeline.Pipeline) Approvals { return approvals{p} }

type approvals struct{ p *pipeline.Pipeline }

// approvalView is an approval as approvers see it: the masked request
// document, never the stored unmasked one.
func approvalView(a *approval.Approval) apiv1.Approval {
	v := apiv1.Approval{
		ID: a.ID, CallID: a.CallID, DecisionID: a.DecisionID, SessionID: a.SessionID, Tool: a.Tool, Action: a.Action,
		Principal: a.Principal, Status: a.Status, Outcome: a.Outcome, Reasons: a.Reasons, RequestDigest: a.Digest,
		PolicyRevision: a.PolicyRevision, Input: a.Input, CreatedAt: audit.FormatTime(a.CreatedAt),
		ExpiresAt: audit.FormatTime(a.ExpiresAt), DecidedBy: a.DecidedBy, Comment: a.Comment,
	}
	if !a.DecidedAt.IsZero() {
		v.DecidedAt = audit.FormatTime(a.DecidedAt)
	}
	if v.Reasons == nil {
		v.Reasons = []string{}
	}
	if v.Input == nil {
		v.Input = map[string]any{}
	}
	return v
}

// approvalError maps the failures of the approval steps.
func approvalError(err error) *Error {
	var denied *pipeline.ApproverDeniedError
	switch {
	case errors.As(err, &denied):
		return &Error{Kind: KindForbidden, Message: denied.Message, Err: err}
	case errors.Is(err, pipeline.ErrApprovalNotFound):
		return &Error{Kind: KindNotFound, Message: "no such approval", Err: err}
	case errors.Is(err, pipeline.ErrApprovalDecided):
		return &Error{Kind: KindConflict, Message: "the approval was already decided", Err: err}
	case errors.Is(err, pipeline.ErrApprovalExpired):
		return &Error{Kind: KindConflict, Message: "the approval has expired", Err: err}
	}
	return callError(err)
}

func (s approvals) Approvals(ctx context.Context, id *identity.Identity, f ApprovalFilter) ([]apiv1.Approval, error) {
	l, err := s.p.Approvals(ctx, id, f)
	if err != nil {
		return nil, approvalError(err)
	}
	out := make([]apiv1.Approval, 0, len(l))
	for _, a := range l {
		out = append(out, approvalView(a))
	}
	return out, nil
}

func (s approvals) Approval(ctx context.Context, id *identity.Identity, approvalID string) (apiv1.Approval, error) {
	a, err := s.p.Approval(ctx, id, approvalID)
	if err != nil {
		return apiv1.Approval{}, approvalError(err)
	}
	return approvalView(a), nil
}

func (s approvals) Approve(ctx context.Context, st ApprovalStep) (apiv1.Approval, error) {
	return s.step(ctx, st, s.p.Approve)
}

func (s approvals) Deny(ctx context.Context, st ApprovalStep) (apiv1.Approval, error) {
	return s.step(ctx, st, s.p.Deny)
}

func (s approvals) step(ctx context.Context, st ApprovalStep, f func(context.Context, pipeline.ApprovalStep) (*approval.Approval, error)) (apiv1.Approval, error) {
	a, err := f(ctx, st)
	if err != nil {
		return apiv1.Approval{}, approvalError(err)
	}
	return approvalView(a), nil
}

func (s approvals) Answer(ctx context.Context, st AnswerStep) (apiv1.Question, error) {
	if a := st.Answer; a == "" || len(a) > MaxAnswerBytes || !utf8.ValidString(a) {
		return apiv1.Question{}, &Error{Kind: KindInvalid, Message: fmt.Sprintf("answer must be 1 to %d bytes of UTF-8", MaxAnswerBytes)}
	}
	q, err := s.p.Answer(ctx, st)
	switch {
	case errors.Is(err, pipeline.ErrQuestionNotFound):
		return apiv1.Question{}, &Error{Kind: KindNotFound, Message: "no such question", Err: err}
	case errors.Is(err, pipeline.ErrQuestionAnswered):
		return apiv1.Question{}, &Error{Kind: KindConflict, Message: "the question was already answered", Err: err}
	case errors.Is(err, pipeline.ErrAnswerNotOffered):
		return apiv1.Question{}, &Error{Kind: KindInvalid, Message: "the answer must be exactly one of the question's options", Err: err}
	case err != nil:
		return apiv1.Question{}, callError(err)
	}
	return apiv1.Question{
		ID: q.ID, CallID: q.CallID, Status: q.Status, AnsweredBy: q.AnsweredBy,
		AnsweredAt: audit.FormatTime(q.AnsweredAt), ExpiresAt: audit.FormatTime(q.ExpiresAt),
	}, nil
}

func (s approvals) Questions(ctx context.Context, id *identity.Identity, f QuestionFilter) ([]PendingQuestion, error) {
	l, err := s.p.Questions(ctx, id, f.Limit)
	if err != nil {
		return nil, callError(err)
	}
	out := make([]PendingQuestion, 0, len(l))
	for _, q := range l {
		v := PendingQuestion{
			ID: q.ID, CallID: q.CallID, SessionID: q.SessionID, Tool: q.Tool, Principal: q.Principal,
			Text: q.Text, Options: append([]string{}, q.Options...), RequestDigest: q.Digest,
			PolicyRevision: q.PolicyRevision, CreatedAt: audit.FormatTime(q.CreatedAt), ExpiresAt: audit.FormatTime(q.ExpiresAt),
		}
		out = append(out, v)
	}
	return out, nil
}

func (s approvals) CallStatus(ctx context.Context, id *identity.Identity, callID string, wait time.Duration) (apiv1.CallStatus, error) {
	st, err := s.p.PollCall(ctx, id, callID, wait)
	switch {
	case errors.Is(err, pipeline.ErrCallNotFound):
		return apiv1.CallStatus{}, &Error{Kind: KindNotFound, Message: "no such call", Err: err}
	case err != nil:
		return apiv1.CallStatus{}, callError(err)
	case st.Question != nil:
		return questionStatus(st.Question), nil
	}
	a := st.Approval
	body := apiv1.CallStatus{
		CallID: a.CallID, ApprovalID: a.ID, Outcome: pipeline.CallOutcome(a),
		ExpiresAt: audit.FormatTime(a.ExpiresAt),
	}
	if a.Result != nil {
		body.Content, body.IsError = &a.Result.Content, &a.Result.IsError
		if len(a.Result.Data) > 0 {
			body.Data = a.Result.Data
		}
	}
	return body, nil
}

// questionStatus is a polled ask-user call: pending, or ok with the
// answer as content.
func questionStatus(q *approval.Question) apiv1.CallStatus {
	body := apiv1.CallStatus{
		CallID: q.CallID, QuestionID: q.ID, Outcome: apiv1.OutcomePending,
		ExpiresAt: audit.FormatTime(q.ExpiresAt),
	}
	if q.Status == approval.QuestionAnswered {
		answer, isError := q.Answer, false
		body.Outcome, body.Content, body.IsError = apiv1.OutcomeOK, &answer, &isError
		body.Data = map[string]any{"answered_by": q.AnsweredBy, "answered_at": audit.FormatTime(q.AnsweredAt)}
	}
	return body
}

func (s approvals) CallQuestion(ctx context.Context, id *identity.Identity, callID string) (AskedQuestion, error) {
	q, err := s.p.CallQuestion(ctx, id, callID)
	switch {
	case errors.Is(err, pipeline.ErrQuestionNotFound):
		return AskedQuestion{}, &Error{Kind: KindNotFound, Message: "no such question", Err: err}
	case err != nil:
		return AskedQuestion{}, callError(err)
	}
	return AskedQuestion{
		ID: q.ID, CallID: q.CallID, Status: q.Status, Text: q.Text,
		Options: append([]string(nil), q.Options...), ExpiresAt: q.ExpiresAt,
	}, nil
}
