package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/open-policy-agent/opa/v1/ast"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/approval"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/decision"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/prepare"
)

// Errors of the approval steps, mapped to error kinds by internal/service.
var (
	// ErrApprovalNotFound: no such approval (or call) for this caller.
	ErrApprovalNotFound = errors.New("approval not found")
	// ErrApprovalDecided: approved or denied before.
	ErrApprovalDecided = errors.New("approval already decided")
	// ErrApprovalExpired: nobody decided in time.
	ErrApprovalExpired = errors.New("approval expired")
	// errArtifactChanged: re-preparing the stored call gave another digest.
	errArtifactChanged = errors.New("the call's request document changed between the request and its approval; nothing ran")
)

// ApproverDeniedError is a policy refusing this approver (e.g. approving
// one's own call). The approval stays pending for someone else.
type ApproverDeniedError struct {
	Message string // the policy's message or a fixed text; safe to show
}

func (e *ApproverDeniedError) Error() string { return e.Message }

// TextApproverDenied is said when the policy refuses an approver without a
// message of its own.
const TextApproverDenied = "policy does not allow you to approve this call"

// held is a call about to be held for a human.
type held struct {
	id      string
	expires time.Time
}

func (h *held) info() *audit.ApprovalInfo {
	return &audit.ApprovalInfo{ID: h.id, ExpiresAt: audit.FormatTime(h.expires)}
}

func (h *held) data() map[string]any {
	return map[string]any{"approval_id": h.id, "expires_at": audit.FormatTime(h.expires)}
}

// holdFor decides whether c is held: only real calls (not PDP decisions)
// whose outcome is approval_required, when an approval store is wired.
func (p *Pipeline) holdFor(c *call, outcome apiv1.Outcome, dec decision.Decision) *held {
	if !c.run || outcome != apiv1.OutcomeApprovalRequired || p.o.Approvals == nil {
		return nil
	}
	ttl := p.o.ApprovalTTL
	if ms := dec.Obligations.ApprovalTTLMS; ms > 0 && time.Duration(ms)*time.Millisecond < ttl {
		ttl = time.Duration(ms) * time.Millisecond
	}
	return &held{id: p.o.NewID(), expires: p.o.Now().Add(ttl)}
}

// heldApproval is the frozen call that commits with its decision event
// (audit.Log.AppendWith), so that an audited approval id always exists and
// an approval never exists without its decision. The stored document is
// unmasked: it is what an approval re-prepares.
func (p *Pipeline) heldApproval(c *call, h *held, ev *audit.Event, dec decision.Decision) *approval.Approval {
	return &approval.Approval{
		ID: h.id, Tenant: ev.Tenant, CallID: c.callID, DecisionID: c.decisionID, SessionID: c.req.SessionID,
		Principal: ev.Principal, Client: ev.Client, Tool: c.spec.Name, Action: c.spec.Action,
		Digest: c.prepared.Digest(), PolicyRevision: c.rev.ID(),
		Document: c.prepared.Document(), Input: ev.Input, Reasons: append([]string{}, dec.Reasons...),
		Obligations: dec.Obligations.Raw, CreatedAt: p.o.Now(), ExpiresAt: h.expires,
	}
}

// ApprovalStep is an approver acting on a held call.
type ApprovalStep struct {
	Identity *identity.Identity // the approver, verified
	ID       string             // the approval id
	Comment  string
}

// Approvals lists the caller's tenant's approvals (expired ones first move
// to expired).
func (p *Pipeline) Approvals(ctx context.Context, id *identity.Identity, f approval.Filter) ([]*approval.Approval, error) {
	if p.o.Approvals == nil {
		return []*approval.Approval{}, nil
	}
	if err := p.expireDue(ctx, id.Tenant); err != nil {
		return nil, err
	}
	l, err := p.o.Approvals.List(ctx, id.Tenant, f)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAudit, err)
	}
	return l, nil
}

// Approval returns one approval of the caller's tenant.
func (p *Pipeline) Approval(ctx context.Context, id *identity.Identity, approvalID string) (*approval.Approval, error) {
	if err := p.expireDue(ctx, id.Tenant); err != nil {
		return nil, err
	}
	return p.getApproval(ctx, id.Tenant, approvalID)
}

// CallApproval returns the newest approval of a held call, for its
// original caller only: anyone else sees ErrApprovalNotFound.
func (p *Pipeline) CallApproval(ctx context.Context, id *identity.Identity, callID string) (*approval.Approval, error) {
	if p.o.Approvals == nil {
		return nil, ErrApprovalNotFound
	}
	if err := p.expireDue(ctx, id.Tenant); err != nil {
		return nil, err
	}
	a, err := p.o.Approvals.ByCall(ctx, id.Tenant, callID)
	if errors.Is(err, approval.ErrNotFound) || (err == nil && a.Principal != id.Principal) {
		return nil, ErrApprovalNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAudit, err)
	}
	return a, nil
}

// CallOutcome is what a polling caller learns of a held call: pending
// (waiting, or approved and still running), ok, tool_error, denied or
// expired.
func CallOutcome(a *approval.Approval) apiv1.Outcome {
	switch a.Status {
	case approval.StatusDenied:
		return apiv1.OutcomeDenied
	case approval.StatusExpired:
		return apiv1.OutcomeExpired
	case approval.StatusApproved:
		if a.Outcome != "" {
			return apiv1.Outcome(a.Outcome)
		}
	}
	return apiv1.OutcomePending
}

func (p *Pipeline) getApproval(ctx context.Context, tenant, id string) (*approval.Approval, error) {
	if p.o.Approvals == nil {
		return nil, ErrApprovalNotFound
	}
	a, err := p.o.Approvals.Get(ctx, tenant, id)
	if errors.Is(err, approval.ErrNotFound) {
		return nil, ErrApprovalNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAudit, err)
	}
	return a, nil
}

// pendingApproval returns an approval that is still pending, or says why
// it is not.
func (p *Pipeline) pendingApproval(ctx context.Context, tenant, id string) (*approval.Approval, error) {
	if err := p.expireDue(ctx, tenant); err != nil {
		return nil, err
	}
	a, err := p.getApproval(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	switch a.Status {
	case approval.StatusPending:
		return a, nil
	case approval.StatusExpired:
		return nil, ErrApprovalExpired
	}
	return nil, ErrApprovalDecided
}

// ExpireDue moves the tenant's overdue held calls and ask-user questions
// to expired, auditing each once. The API calls it before every read; the
// gateway also sweeps periodically.
func (p *Pipeline) ExpireDue(ctx context.Context, tenant string) error {
	if err := p.expireDue(ctx, tenant); err != nil {
		return err
	}
	return p.expireQuestions(ctx, tenant)
}

func (p *Pipeline) expireDue(ctx context.Context, tenant string) error {
	if p.o.Approvals == nil {
		return nil
	}
	expired, err := p.o.Approvals.Expire(ctx, tenant, p.o.Now())
	if err != nil {
		return fmt.Errorf("%w: %v", ErrAudit, err)
	}
	for _, a := range expired {
		ev := p.heldEvent(a, p.o.NewID(), audit.PhaseApproval, apiv1.OutcomeExpired, p.revisionID())
		ev.Reasons = []string{"nobody decided before " + audit.FormatTime(a.ExpiresAt)}
		if err := p.o.Audit.Append(ctx, ev); err != nil {
			p.o.Logger.Error("expiry event not written", "tenant", tenant, "approval_id", a.ID, "err", err)
		}
		p.calls.notify(callKey(tenant, a.CallID))
	}
	return nil
}

// Deny refuses a held call for good.
func (p *Pipeline) Deny(ctx context.Context, s ApprovalStep) (*approval.Approval, error) {
	tenant := s.Identity.Tenant
	if _, err := p.pendingApproval(ctx, tenant, s.ID); err != nil {
		return nil, err
	}
	a, err := p.o.Approvals.Decide(ctx, tenant, s.ID, approval.Decision{
		Status: approval.StatusDenied, By: s.Identity.Principal, Comment: s.Comment, At: p.o.Now(),
	})
	if err != nil {
		return nil, p.decideErr(ctx, tenant, err)
	}
	defer p.calls.notify(callKey(tenant, a.CallID))
	ev := p.approverEvent(a, s, apiv1.OutcomeDenied)
	if err := p.o.Audit.Append(ctx, ev); err != nil {
		p.o.Logger.Error("denial event not written", "tenant", tenant, "approval_id", a.ID, "err", err)
		return nil, fmt.Errorf("%w: %v", ErrAudit, err)
	}
	return a, nil
}

// Approve runs a held call, once: a second decision on the stored request
// document, with the approver in input.approval, must allow it (so policy
// can forbid self-approval or require a role); the approval is then
// claimed atomically; the stored call is re-prepared and runs only if its
// digest is the one that was held. Every step is audited.
func (p *Pipeline) Approve(ctx context.Context, s ApprovalStep) (*approval.Approval, error) {
	tenant := s.Identity.Tenant
	a, err := p.pendingApproval(ctx, tenant, s.ID)
	if err != nil {
		return nil, err
	}
	rev, err := p.revision()
	if err != nil {
		return nil, err
	}

	// The second decision: the held document plus the approver.
	doc := cloneDoc(a.Document)
	doc["approval"] = map[string]any{"id": s.Identity.Principal, "roles": anyStrings(s.Identity.Roles)}
	in, err := ast.InterfaceToValue(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errInternal, err)
	}
	t0 := time.Now()
	dec, err := rev.Decide(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPolicy, err)
	}
	mask, err := rev.Mask(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPolicy, err)
	}
	outcome := apiv1.OutcomeAllow
	if !dec.Allow {
		outcome = apiv1.OutcomeDenied
	}
	decisionID := p.o.NewID()
	ev := p.heldEvent(a, decisionID, audit.PhaseDecision, outcome, rev.ID())
	ev.Reasons = append([]string{}, dec.Reasons...)
	ev.Input = audit.Mask(doc, mask)
	ev.Obligations = dec.Obligations.Raw
	ev.Decision = dec.Raw
	ev.Approval.By, ev.Approval.Comment = s.Identity.Principal, s.Comment
	ev.DurationsUS["decide"] = time.Since(t0).Microseconds()
	if err := p.o.Audit.Append(ctx, ev); err != nil {
		return nil, p.auditErr(ev, err)
	}
	if !dec.Allow {
		msg := dec.Message
		if msg == "" {
			msg = TextApproverDenied
		}
		return nil, &ApproverDeniedError{Message: msg}
	}

	// Claim: of concurrent approvers exactly one gets here.
	a, err = p.o.Approvals.Decide(ctx, tenant, a.ID, approval.Decision{
		Status: approval.StatusApproved, By: s.Identity.Principal, Comment: s.Comment, At: p.o.Now(),
	})
	if err != nil {
		return nil, p.decideErr(ctx, tenant, err)
	}
	// From here the call is ours to finish, whatever the approver's
	// connection does.
	ctx = context.WithoutCancel(ctx)
	if err := p.o.Audit.Append(ctx, p.approverEvent(a, s, apiv1.OutcomeApproved)); err != nil {
		p.finish(ctx, a, apiv1.OutcomeToolError, approval.Result{Content: "the tool failed", IsError: true})
		return nil, p.auditErr(ev, err)
	}

	res := p.heldEvent(a, decisionID, audit.PhaseResult, apiv1.OutcomeToolError, rev.ID())
	res.Approval.By = s.Identity.Principal
	prep, err := p.rebuild(ctx, a)
	if err != nil {
		p.o.Logger.Warn("approved call not run", "tenant", tenant, "approval_id", a.ID, "err", err)
		res.Result = &audit.ResultInfo{IsError: true, Error: err.Error()}
		if err := p.o.Audit.Append(ctx, res); err != nil {
			p.o.Metrics.ResultAuditLost.Inc()
		}
		return p.finish(ctx, a, apiv1.OutcomeToolError, approval.Result{Content: "the tool failed", IsError: true}), nil
	}
	out := p.o.Invoker.Invoke(ctx, prep, dec.Obligations)
	res.Outcome = string(out.Outcome)
	res.DurationsUS["invoke"] = out.Duration.Microseconds()
	res.Result = &audit.ResultInfo{IsError: out.IsError, Bytes: out.Bytes, Truncated: out.Truncated}
	if out.Err != nil {
		res.Result.Error = out.Err.Error()
	}
	if err := p.o.Audit.Append(ctx, res); err != nil {
		p.o.Metrics.ResultAuditLost.Inc()
		p.o.Logger.Error("result event not written", "tenant", tenant, "call_id", a.CallID, "err", err)
	}
	return p.finish(ctx, a, out.Outcome, approval.Result{Content: out.Content, IsError: out.IsError, Data: out.Data}), nil
}

// finish records an approved call's outcome and returns the approval as
// stored afterwards.
func (p *Pipeline) finish(ctx context.Context, a *approval.Approval, outcome apiv1.Outcome, r approval.Result) *approval.Approval {
	if err := p.o.Approvals.Finish(ctx, a.Tenant, a.ID, string(outcome), r); err != nil {
		p.o.Logger.Error("approved call's outcome not stored", "tenant", a.Tenant, "approval_id", a.ID, "err", err)
	}
	a.Outcome, a.Result = string(outcome), &r
	p.calls.notify(callKey(a.Tenant, a.CallID))
	return a
}

// rebuild re-prepares the stored call under the identity it was decided
// for, and accepts it only when the digest is the held one: the same
// arguments, the same normalized resources (symlinks resolved now), the
// same principal.
func (p *Pipeline) rebuild(ctx context.Context, a *approval.Approval) (*prepare.Prepared, error) {
	tool, ok := p.o.Registry.Lookup(a.Tool)
	base := p.o.Envs[a.Tenant]
	if !ok || base == nil {
		return nil, errors.New("the held tool is no longer configured; nothing ran")
	}
	id, err := identityOf(a.Document)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(a.Document["args"])
	if err != nil {
		return nil, fmt.Errorf("stored arguments: %w", err)
	}
	env := *base
	env.SessionID, env.Principal = a.SessionID, id.Principal
	prep, err := p.o.Preparer.Prepare(ctx, prepare.Call{
		Identity: id, SessionID: a.SessionID, CallID: a.CallID, Tool: tool, Env: &env, RawArgs: raw,
	})
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", errArtifactChanged, err)
	}
	if prep.Digest() != a.Digest {
		return nil, errArtifactChanged
	}
	return prep, nil
}

// identityOf reads the caller's identity back from a request document.
func identityOf(doc map[string]any) (*identity.Identity, error) {
	bad := errors.New("stored request document has no valid principal")
	tenant, _ := doc["tenant"].(string)
	pr, _ := doc["principal"].(map[string]any)
	if tenant == "" || pr == nil {
		return nil, bad
	}
	id := &identity.Identity{Tenant: tenant}
	if id.Principal, _ = pr["id"].(string); id.Principal == "" {
		return nil, bad
	}
	var err error
	if id.Roles, err = stringList(pr["roles"]); err != nil {
		return nil, bad
	}
	if id.Groups, err = stringList(pr["groups"]); err != nil {
		return nil, bad
	}
	if c, ok := pr["claims"].(map[string]any); ok && len(c) > 0 {
		id.Claims = c
	}
	if cl, ok := doc["client"].(map[string]any); ok {
		id.Client, _ = cl["id"].(string)
	}
	return id, nil
}

func stringList(v any) ([]string, error) {
	l, ok := v.([]any)
	if !ok && v != nil {
		return nil, errors.New("not a list")
	}
	out := make([]string, 0, len(l))
	for _, e := range l {
		s, ok := e.(string)
		if !ok {
			return nil, errors.New("not a string")
		}
		out = append(out, s)
	}
	return out, nil
}

func anyStrings(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// cloneDoc copies the top level: the approval member is added to the copy
// only; nested values are never modified.
func cloneDoc(doc map[string]any) map[string]any {
	out := make(map[string]any, len(doc)+1)
	for k, v := range doc {
		out[k] = v
	}
	return out
}

// heldEvent is an audit event about a held call, on behalf of its caller.
func (p *Pipeline) heldEvent(a *approval.Approval, decisionID, phase string, outcome apiv1.Outcome, revision string) *audit.Event {
	return &audit.Event{
		Tenant: a.Tenant, Principal: a.Principal, Client: a.Client, CallID: a.CallID, DecisionID: decisionID,
		SessionID: a.SessionID, Tool: a.Tool, Action: a.Action, Phase: phase, Outcome: string(outcome),
		Reasons: []string{}, PolicyRevision: revision, RequestDigest: a.Digest, Input: a.Input,
		DurationsUS: map[string]int64{}, Approval: &audit.ApprovalInfo{ID: a.ID},
	}
}

// approverEvent records an approver's step; its principal is the approver.
func (p *Pipeline) approverEvent(a *approval.Approval, s ApprovalStep, outcome apiv1.Outcome) *audit.Event {
	ev := p.heldEvent(a, a.DecisionID, audit.PhaseApproval, outcome, a.PolicyRevision)
	ev.Principal, ev.Client = s.Identity.Principal, s.Identity.Client
	ev.Approval.By, ev.Approval.Comment = s.Identity.Principal, s.Comment
	return ev
}

func (p *Pipeline) decideErr(ctx context.Context, tenant string, err error) error {
	switch {
	case errors.Is(err, approval.ErrExpired):
		if err := p.expireDue(ctx, tenant); err != nil {
			return err
		}
		return ErrApprovalExpired
	case errors.Is(err, approval.ErrNotPending):
		return ErrApprovalDecided
	case errors.Is(err, approval.ErrNotFound):
		return ErrApprovalNotFound
	}
	return fmt.Errorf("%w: %v", ErrAudit, err)
}

func (p *Pipeline) auditErr(ev *audit.Event, err error) error {
	p.o.Logger.Error("approval event not written; failing closed", "tenant", ev.Tenant, "call_id", ev.CallID, "err", err)
	if errors.Is(err, audit.ErrOverloaded) {
		return fmt.Errorf("%w: %v", ErrOverloaded, err)
	}
	return fmt.Errorf("%w: %v", ErrAudit, err)
}

// revisionID is the serving revision's id, "" when none loaded.
func (p *Pipeline) revisionID() string {
	if rev, err := p.o.Engine.Current(); err == nil {
		return rev.ID()
	}
	return ""
}
