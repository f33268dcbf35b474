package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/approval"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/invoke"
)

// TextAwaitingUser is the content of an awaiting_user call.
const TextAwaitingUser = "awaiting user"

// Errors of the answer step, mapped to error kinds by internal/service.
var (
	// ErrQuestionNotFound: no such question for this caller; an expired
	// question, another tenant's, and another principal's that policy does
	// not let the caller answer all look the same.
	ErrQuestionNotFound = errors.New("question not found")
	// ErrQuestionAnswered: answered before.
	ErrQuestionAnswered = errors.New("question already answered")
	// ErrAnswerNotOffered: the question offered options and the answer is
	// none of them.
	ErrAnswerNotOffered = errors.New("the answer is not one of the question's options")
)

// asker is a tool whose successful result is a question for the caller's
// user (ask-user): the pipeline stores it, and the call answers
// awaiting_user instead of the tool's content.
type asker interface {
	UserQuestion(data map[string]any) (text string, options []string, ok bool)
}

// ask shapes the awaiting_user outcome of an ask-user call and the
// question it asked. The question is not stored here: it commits with the
// call's result event (see execute). A call whose question cannot be made
// fails (tool_error): the model must not wait for an answer that can never
// come.
func (p *Pipeline) ask(c *call, a asker, auth *authorized, out invoke.Outcome) (invoke.Outcome, *approval.Question) {
	dec, id := auth.dec, c.req.Identity
	failed := func(err error) (invoke.Outcome, *approval.Question) {
		return invoke.Outcome{Outcome: apiv1.OutcomeToolError, Content: invoke.ToolFailed, IsError: true, Err: err, Duration: out.Duration}, nil
	}
	text, options, ok := a.UserQuestion(out.Data)
	if !ok {
		return failed(errors.New("ask-user returned no question"))
	}
	if p.o.Approvals == nil {
		return failed(errors.New("no question store is configured"))
	}
	ttl := p.o.QuestionTTL
	if ms := dec.Obligations.ApprovalTTLMS; ms > 0 && time.Duration(ms)*time.Millisecond < ttl {
		ttl = time.Duration(ms) * time.Millisecond
	}
	now := p.o.Now()
	q := &approval.Question{
		ID: p.o.NewID(), Tenant: id.Tenant, CallID: c.callID, DecisionID: c.decisionID, SessionID: c.req.SessionID,
		Principal: id.Principal, Client: id.Client, Tool: c.spec.Name, Action: c.spec.Action,
		Digest: auth.prepared.Digest(), PolicyRevision: c.rev.ID(), Document: auth.prepared.Document(), Input: auth.input,
		Text: text, Options: options, CreatedAt: now, ExpiresAt: now.Add(ttl),
	}
	return invoke.Outcome{
		Outcome: apiv1.OutcomeAwaitingUser, Content: TextAwaitingUser, Bytes: out.Bytes, Duration: out.Duration,
		Data: map[string]any{"question_id": q.ID, "expires_at": audit.FormatTime(q.ExpiresAt)},
	}, q
}

// AnswerStep is someone answering a question.
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

// Answer records the answer to a pending question, once. The asker may
// always answer; anyone else of the tenant only when a second decision on
// the stored request document, with input.answer = {"id", "roles"} of the
// answerer, allows it (audited either way). Without that permission the
// question does not exist for them. Every step is audited; long-polling
// callers wake up.
func (p *Pipeline) Answer(ctx context.Context, s AnswerStep) (*approval.Question, error) {
	tenant := s.Identity.Tenant
	q, err := p.question(ctx, tenant, s.ID)
	if err != nil {
		return nil, err
	}
	if q.Principal != s.Identity.Principal {
		if err := p.mayAnswer(ctx, q, s); err != nil {
			return nil, err
		}
	}
	if q.Status == approval.QuestionAnswered {
		return nil, ErrQuestionAnswered
	}
	q, err = p.o.Approvals.AnswerQuestion(ctx, tenant, s.ID, approval.Answer{Text: s.Answer, By: s.Identity.Principal, At: p.o.Now()})
	switch {
	case errors.Is(err, approval.ErrNotOffered):
		return nil, ErrAnswerNotOffered
	case errors.Is(err, approval.ErrNotPending) && q.Status == approval.QuestionAnswered:
		return nil, ErrQuestionAnswered
	case errors.Is(err, approval.ErrNotPending), errors.Is(err, approval.ErrNotFound):
		return nil, ErrQuestionNotFound
	case errors.Is(err, approval.ErrExpired):
		if err := p.expireQuestions(ctx, tenant); err != nil {
			return nil, err
		}
		return nil, ErrQuestionNotFound
	case err != nil:
		return nil, fmt.Errorf("%w: %v", ErrAudit, err)
	}
	defer p.calls.notify(callKey(tenant, q.CallID))
	ev := p.questionEvent(q, q.DecisionID, audit.PhaseQuestion, apiv1.OutcomeAnswered, q.PolicyRevision)
	ev.Principal, ev.Client = s.Identity.Principal, s.Identity.Client
	ev.Question.By = s.Identity.Principal
	ev.Via, ev.MCPRequestID = s.Via, s.MCPRequestID
	ev.Result = &audit.ResultInfo{Bytes: len(s.Answer)}
	if err := p.o.Audit.Append(ctx, ev); err != nil {
		return nil, p.auditErr(ev, err)
	}
	return q, nil
}

// mayAnswer takes the second decision for an answerer who is not the
// asker. A refusal looks like a missing question.
func (p *Pipeline) mayAnswer(ctx context.Context, q *approval.Question, s AnswerStep) error {
	rev, err := p.revision()
	if err != nil {
		return err
	}
	doc := answerDocument(q, s.Identity)
	in, err := ast.InterfaceToValue(doc)
	if err != nil {
		return fmt.Errorf("%w: %v", errInternal, err)
	}
	t0 := time.Now()
	dec, err := rev.Decide(ctx, in)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPolicy, err)
	}
	mask, err := rev.Mask(ctx, in)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPolicy, err)
	}
	outcome := apiv1.OutcomeAllow
	if !dec.Allow {
		outcome = apiv1.OutcomeDenied
	}
	ev := p.questionEvent(q, p.o.NewID(), audit.PhaseDecision, outcome, rev.ID())
	ev.Reasons = append([]string{}, dec.Reasons...)
	ev.Input = audit.Mask(doc, mask)
	ev.Question.By = s.Identity.Principal
	ev.DurationsUS["decide"] = time.Since(t0).Microseconds()
	if err := p.o.Audit.Append(ctx, ev); err != nil {
		return p.auditErr(ev, err)
	}
	if !dec.Allow {
		return ErrQuestionNotFound
	}
	return nil
}

// question returns a question of the tenant that has not expired.
func (p *Pipeline) question(ctx context.Context, tenant, id string) (*approval.Question, error) {
	if p.o.Approvals == nil {
		return nil, ErrQuestionNotFound
	}
	if err := p.expireQuestions(ctx, tenant); err != nil {
		return nil, err
	}
	q, err := p.o.Approvals.Question(ctx, tenant, id)
	if errors.Is(err, approval.ErrNotFound) || (err == nil && q.Status == approval.QuestionExpired) {
		return nil, ErrQuestionNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAudit, err)
	}
	return q, nil
}

// CallQuestion returns the newest question of an ask-user call, for its
// asker only: anyone else, and everyone once it expired, sees
// ErrQuestionNotFound.
func (p *Pipeline) CallQuestion(ctx context.Context, id *identity.Identity, callID string) (*approval.Question, error) {
	if p.o.Approvals == nil {
		return nil, ErrQuestionNotFound
	}
	if err := p.expireQuestions(ctx, id.Tenant); err != nil {
		return nil, err
	}
	q, err := p.o.Approvals.QuestionByCall(ctx, id.Tenant, callID)
	if errors.Is(err, approval.ErrNotFound) || (err == nil && (q.Principal != id.Principal || q.Status == approval.QuestionExpired)) {
		return nil, ErrQuestionNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAudit, err)
	}
	return q, nil
}

// expireQuestions moves the tenant's overdue questions to expired,
// auditing each once and waking their waiters.
func (p *Pipeline) expireQuestions(ctx context.Context, tenant string) error {
	if p.o.Approvals == nil {
		return nil
	}
	expired, err := p.o.Approvals.ExpireQuestions(ctx, tenant, p.o.Now())
	if err != nil {
		return fmt.Errorf("%w: %v", ErrAudit, err)
	}
	for _, q := range expired {
		ev := p.questionEvent(q, p.o.NewID(), audit.PhaseQuestion, apiv1.OutcomeExpired, p.revisionID())
		ev.Reasons = []string{"nobody answered before " + audit.FormatTime(q.ExpiresAt)}
		if err := p.o.Audit.Append(ctx, ev); err != nil {
			p.o.Logger.Error("question expiry event not written", "tenant", tenant, "question_id", q.ID, "err", err)
		}
		p.calls.notify(callKey(tenant, q.CallID))
	}
	return nil
}

// questionEvent is an audit event about a question, on behalf of its
// asker.
func (p *Pipeline) questionEvent(q *approval.Question, decisionID, phase string, outcome apiv1.Outcome, revision string) *audit.Event {
	return &audit.Event{
		Tenant: q.Tenant, Principal: q.Principal, Client: q.Client, CallID: q.CallID, DecisionID: decisionID,
		SessionID: q.SessionID, Tool: q.Tool, Action: q.Action, Phase: phase, Outcome: string(outcome),
		Reasons: []string{}, PolicyRevision: revision, RequestDigest: q.Digest, Input: q.Input,
		DurationsUS: map[string]int64{}, Question: &audit.QuestionInfo{ID: q.ID},
	}
}
