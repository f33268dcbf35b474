package backend

import (
	"context"
	"errors"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/approval"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/pipeline"
	"github.com/toolgate/toolgate/internal/service"
)

// NewApprovals is the Approvals service over a pipeline, checked
// (service.CheckedApprovals).
func NewApprovals(p *pipeline.Pipeline) service.Approvals {
	return service.CheckedApprovals(approvals{p})
}

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
func approvalError(err error) *service.Error {
	var denied *pipeline.ApproverDeniedError
	switch {
	case errors.As(err, &denied):
		return &service.Error{Kind: service.KindForbidden, Message: denied.Message, Err: err}
	case errors.Is(err, pipeline.ErrApprovalNotFound):
		return &service.Error{Kind: service.KindNotFound, Message: "no such approval", Err: err}
	case errors.Is(err, pipeline.ErrApprovalDecided):
		return &service.Error{Kind: service.KindConflict, Message: "the approval was already decided", Err: err}
	case errors.Is(err, pipeline.ErrApprovalExpired):
		return &service.Error{Kind: service.KindConflict, Message: "the approval has expired", Err: err}
	}
	return callError(err)
}

func (s approvals) Approvals(ctx context.Context, id *identity.Identity, f service.ApprovalFilter) ([]apiv1.Approval, error) {
	l, err := s.p.Approvals(ctx, id, approval.Filter{Status: f.Status, Limit: f.Limit})
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

func (s approvals) Approve(ctx context.Context, st service.ApprovalStep) (apiv1.Approval, error) {
	return s.step(ctx, st, s.p.Approve)
}

func (s approvals) Deny(ctx context.Context, st service.ApprovalStep) (apiv1.Approval, error) {
	return s.step(ctx, st, s.p.Deny)
}

func (s approvals) step(ctx context.Context, st service.ApprovalStep, f func(context.Context, pipeline.ApprovalStep) (*approval.Approval, error)) (apiv1.Approval, error) {
	a, err := f(ctx, pipeline.ApprovalStep{Identity: st.Identity, ID: st.ID, Comment: st.Comment})
	if err != nil {
		return apiv1.Approval{}, approvalError(err)
	}
	return approvalView(a), nil
}

func (s approvals) Answer(ctx context.Context, st service.AnswerStep) (apiv1.Question, error) {
	q, err := s.p.Answer(ctx, pipeline.AnswerStep{Identity: st.Identity, ID: st.ID, Answer: st.Answer, Via: st.Via, MCPRequestID: st.MCPRequestID})
	switch {
	case errors.Is(err, pipeline.ErrQuestionNotFound):
		return apiv1.Question{}, &service.Error{Kind: service.KindNotFound, Message: "no such question", Err: err}
	case errors.Is(err, pipeline.ErrQuestionAnswered):
		return apiv1.Question{}, &service.Error{Kind: service.KindConflict, Message: "the question was already answered", Err: err}
	case errors.Is(err, pipeline.ErrAnswerNotOffered):
		return apiv1.Question{}, &service.Error{Kind: service.KindInvalid, Message: "the answer must be exactly one of the question's options", Err: err}
	case err != nil:
		return apiv1.Question{}, callError(err)
	}
	return apiv1.Question{
		ID: q.ID, CallID: q.CallID, Status: q.Status, AnsweredBy: q.AnsweredBy,
		AnsweredAt: audit.FormatTime(q.AnsweredAt), ExpiresAt: audit.FormatTime(q.ExpiresAt),
	}, nil
}

func (s approvals) Questions(ctx context.Context, id *identity.Identity, f service.QuestionFilter) ([]service.PendingQuestion, error) {
	l, err := s.p.Questions(ctx, id, f.Limit)
	if err != nil {
		return nil, callError(err)
	}
	out := make([]service.PendingQuestion, 0, len(l))
	for _, q := range l {
		v := service.PendingQuestion{
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
		return apiv1.CallStatus{}, &service.Error{Kind: service.KindNotFound, Message: "no such call", Err: err}
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

func (s approvals) CallQuestion(ctx context.Context, id *identity.Identity, callID string) (service.AskedQuestion, error) {
	q, err := s.p.CallQuestion(ctx, id, callID)
	switch {
	case errors.Is(err, pipeline.ErrQuestionNotFound):
		return service.AskedQuestion{}, &service.Error{Kind: service.KindNotFound, Message: "no such question", Err: err}
	case err != nil:
		return service.AskedQuestion{}, callError(err)
	}
	return service.AskedQuestion{
		ID: q.ID, CallID: q.CallID, Status: q.Status, Text: q.Text,
		Options: append([]string(nil), q.Options...), ExpiresAt: q.ExpiresAt,
	}, nil
}
