package service

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/identity"
)

// The services own their checks: the role a method needs and the syntax
// and bounds of its request are checked here, by the wrappers Checked
// returns, before the implementation (internal/service/backend) reads or
// changes anything. The implementations' constructors return their
// services wrapped, and a front door wraps what it is given again
// (a no-op for a service already checked), so no front door and no test
// fake sees a request the service would refuse.

// idRE is the syntax of every id a caller names: call, session, approval,
// question and event ids.
var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$`)

// ValidID reports whether s is an id: 1-128 characters of letters,
// digits and ._:@-, starting with a letter or digit.
func ValidID(s string) bool { return idRE.MatchString(s) }

// Authorize is the role check of every guarded method: nil when id holds
// role, else a KindForbidden error. A front door may call it early (the
// REST API does, so that a caller without the role learns nothing of the
// request's syntax), but the service checks again.
func Authorize(id *identity.Identity, role string) error {
	if !id.HasRole(role) {
		return Errorf(KindForbidden, "this route requires the %s role", role)
	}
	return nil
}

// authenticated refuses a request with no identity: a front door that
// forgot to authenticate fails closed.
func authenticated(id *identity.Identity) error {
	if id == nil {
		return Errorf(KindUnauthenticated, "a valid credential is required")
	}
	return nil
}

// optionalID checks an id the caller may leave empty.
func optionalID(field, v string) error {
	if v != "" && !ValidID(v) {
		return Errorf(KindInvalid, "%s must be 1-128 characters of letters, digits and ._:@- starting with a letter or digit", field)
	}
	return nil
}

// pageLimit checks a page size: 0 is the default, else 1 to max.
func pageLimit(n, def, max int) (int, error) {
	switch {
	case n == 0:
		return def, nil
	case n < 0 || n > max:
		return 0, Errorf(KindInvalid, "limit must be an integer from 1 to %d", max)
	}
	return n, nil
}

// Checked is s with every service checked (Health needs no role).
func Checked(s Services) Services {
	s.Calls = CheckedCalls(s.Calls)
	s.Approvals = CheckedApprovals(s.Approvals)
	s.Policy = CheckedPolicy(s.Policy)
	s.Audit = CheckedAudit(s.Audit)
	return s
}

// CheckedCalls is c with its requests checked: an identity, and the
// syntax of session and call ids (and, in a batch, tool names and
// repeated call ids). It returns c itself when c is already checked.
func CheckedCalls(c Calls) Calls {
	if cc, ok := c.(checkedCalls); ok {
		return cc
	}
	return checkedCalls{c}
}

type checkedCalls struct{ next Calls }

func (c checkedCalls) Tools(ctx context.Context, id *identity.Identity, sessionID string) ([]apiv1.Tool, error) {
	if err := authenticated(id); err != nil {
		return nil, err
	}
	if err := optionalID("session_id", sessionID); err != nil {
		return nil, err
	}
	return c.next.Tools(ctx, id, sessionID)
}

func checkCall(req CallRequest) error {
	if err := authenticated(req.Identity); err != nil {
		return err
	}
	if err := optionalID("session_id", req.SessionID); err != nil {
		return err
	}
	return optionalID("call_id", req.CallID)
}

func (c checkedCalls) Call(ctx context.Context, req CallRequest) (apiv1.CallResponse, error) {
	if err := checkCall(req); err != nil {
		return apiv1.CallResponse{}, err
	}
	return c.next.Call(ctx, req)
}

func (c checkedCalls) Decide(ctx context.Context, req CallRequest) (apiv1.DecisionResponse, error) {
	if err := checkCall(req); err != nil {
		return apiv1.DecisionResponse{}, err
	}
	return c.next.Decide(ctx, req)
}

func (c checkedCalls) Batch(ctx context.Context, req BatchRequest, run bool) (BatchResult, error) {
	if err := authenticated(req.Identity); err != nil {
		return BatchResult{Failed: -1}, err
	}
	if err := optionalID("session_id", req.SessionID); err != nil {
		return BatchResult{Failed: -1}, err
	}
	if len(req.Calls) == 0 {
		return BatchResult{Failed: -1}, Errorf(KindInvalid, "calls must not be empty")
	}
	ids := map[string]int{}
	for i, bc := range req.Calls {
		at := fmt.Sprintf("calls[%d]", i)
		if bc.Tool == "" || len(bc.Tool) > 128 {
			return BatchResult{Failed: -1}, Errorf(KindInvalid, "%s.tool must be a tool name of 1-128 bytes", at)
		}
		if err := optionalID(at+".call_id", bc.CallID); err != nil {
			return BatchResult{Failed: -1}, err
		}
		if bc.CallID == "" {
			continue
		}
		if first, dup := ids[bc.CallID]; dup {
			return BatchResult{Failed: -1}, Errorf(KindInvalid, "%s.call_id repeats the call_id of calls[%d]", at, first)
		}
		ids[bc.CallID] = i
	}
	return c.next.Batch(ctx, req, run)
}

// CheckedApprovals is a with its checks: the approver role for listing,
// reading and deciding held calls; ids, comments, answers, limits and
// waits in range. It returns a itself when a is already checked.
func CheckedApprovals(a Approvals) Approvals {
	if ca, ok := a.(checkedApprovals); ok {
		return ca
	}
	return checkedApprovals{a}
}

type checkedApprovals struct{ next Approvals }

var approvalStatuses = map[string]bool{
	"": true, apiv1.ApprovalPending: true, apiv1.ApprovalApproved: true, apiv1.ApprovalDenied: true, apiv1.ApprovalExpired: true,
}

func (a checkedApprovals) Approvals(ctx context.Context, id *identity.Identity, f ApprovalFilter) ([]apiv1.Approval, error) {
	if err := Authorize(id, identity.RoleApprover); err != nil {
		return nil, err
	}
	if !approvalStatuses[f.Status] {
		return nil, Errorf(KindInvalid, "status must be pending, approved, denied or expired")
	}
	var err error
	if f.Limit, err = pageLimit(f.Limit, ApprovalsDefaultLimit, ApprovalsMaxLimit); err != nil {
		return nil, err
	}
	return a.next.Approvals(ctx, id, f)
}

func errNoApproval() error { return Errorf(KindNotFound, "no such approval") }

func (a checkedApprovals) Approval(ctx context.Context, id *identity.Identity, approvalID string) (apiv1.Approval, error) {
	if err := Authorize(id, identity.RoleApprover); err != nil {
		return apiv1.Approval{}, err
	}
	if !ValidID(approvalID) {
		return apiv1.Approval{}, errNoApproval()
	}
	return a.next.Approval(ctx, id, approvalID)
}

func checkStep(s ApprovalStep) error {
	if err := Authorize(s.Identity, identity.RoleApprover); err != nil {
		return err
	}
	if len(s.Comment) > MaxCommentBytes || !utf8.ValidString(s.Comment) {
		return Errorf(KindInvalid, "comment must be at most %d bytes of UTF-8", MaxCommentBytes)
	}
	if !ValidID(s.ID) {
		return errNoApproval()
	}
	return nil
}

func (a checkedApprovals) Approve(ctx context.Context, s ApprovalStep) (apiv1.Approval, error) {
	if err := checkStep(s); err != nil {
		return apiv1.Approval{}, err
	}
	return a.next.Approve(ctx, s)
}

func (a checkedApprovals) Deny(ctx context.Context, s ApprovalStep) (apiv1.Approval, error) {
	if err := checkStep(s); err != nil {
		return apiv1.Approval{}, err
	}
	return a.next.Deny(ctx, s)
}

func (a checkedApprovals) Answer(ctx context.Context, s AnswerStep) (apiv1.Question, error) {
	if err := authenticated(s.Identity); err != nil {
		return apiv1.Question{}, err
	}
	if v := s.Answer; v == "" || len(v) > MaxAnswerBytes || !utf8.ValidString(v) {
		return apiv1.Question{}, Errorf(KindInvalid, "answer must be 1 to %d bytes of UTF-8", MaxAnswerBytes)
	}
	if !ValidID(s.ID) {
		return apiv1.Question{}, Errorf(KindNotFound, "no such question")
	}
	return a.next.Answer(ctx, s)
}

func (a checkedApprovals) Questions(ctx context.Context, id *identity.Identity, f QuestionFilter) ([]PendingQuestion, error) {
	if err := authenticated(id); err != nil {
		return nil, err
	}
	var err error
	if f.Limit, err = pageLimit(f.Limit, ApprovalsDefaultLimit, ApprovalsMaxLimit); err != nil {
		return nil, err
	}
	return a.next.Questions(ctx, id, f)
}

func (a checkedApprovals) CallStatus(ctx context.Context, id *identity.Identity, callID string, wait time.Duration) (apiv1.CallStatus, error) {
	if err := authenticated(id); err != nil {
		return apiv1.CallStatus{}, err
	}
	if wait < 0 || wait > MaxPollWait {
		return apiv1.CallStatus{}, Errorf(KindInvalid, "wait must be from 0s to %s", MaxPollWait)
	}
	if !ValidID(callID) {
		return apiv1.CallStatus{}, Errorf(KindNotFound, "no such call")
	}
	return a.next.CallStatus(ctx, id, callID, wait)
}

func (a checkedApprovals) CallQuestion(ctx context.Context, id *identity.Identity, callID string) (AskedQuestion, error) {
	if err := authenticated(id); err != nil {
		return AskedQuestion{}, err
	}
	if !ValidID(callID) {
		return AskedQuestion{}, Errorf(KindNotFound, "no such question")
	}
	return a.next.CallQuestion(ctx, id, callID)
}

// CheckedPolicy is p with the policy-admin role required of every method
// and its requests checked. It returns p itself when p is already
// checked.
func CheckedPolicy(p Policy) Policy {
	if cp, ok := p.(checkedPolicy); ok {
		return cp
	}
	return checkedPolicy{p}
}

type checkedPolicy struct{ next Policy }

func (p checkedPolicy) Info(ctx context.Context, id *identity.Identity) (apiv1.PolicyInfo, error) {
	if err := Authorize(id, identity.RolePolicyAdmin); err != nil {
		return apiv1.PolicyInfo{}, err
	}
	return p.next.Info(ctx, id)
}

func (p checkedPolicy) Evaluate(ctx context.Context, req EvalRequest) (apiv1.PolicyEvalResponse, error) {
	if err := Authorize(req.Admin, identity.RolePolicyAdmin); err != nil {
		return apiv1.PolicyEvalResponse{}, err
	}
	if !ValidExplain(req.Explain) {
		return apiv1.PolicyEvalResponse{}, Errorf(KindInvalid, "explain must be notes, fails or full")
	}
	if (req.Document == nil) == (req.Tool == "") || (req.Tool != "" && (req.As == nil || req.As.Principal == "")) {
		return apiv1.PolicyEvalResponse{}, Errorf(KindInvalid, "give either a request document or a tool with a principal, not both")
	}
	if err := optionalID("session_id", req.SessionID); err != nil {
		return apiv1.PolicyEvalResponse{}, err
	}
	return p.next.Evaluate(ctx, req)
}

func (p checkedPolicy) Replay(ctx context.Context, req ReplayRequest) (*ReplayReport, error) {
	if err := Authorize(req.Admin, identity.RolePolicyAdmin); err != nil {
		return nil, err
	}
	if req.Shadow == (len(req.Modules) > 0) || (req.Shadow && req.Data != nil) {
		return nil, Errorf(KindInvalid, "give either modules (and optional data) or the shadow candidate")
	}
	if len(req.Modules) > MaxReplayModules {
		return nil, Errorf(KindInvalid, "too many modules (at most %d)", MaxReplayModules)
	}
	if req.Changes < 0 || req.Changes > MaxReplayChanges {
		return nil, Errorf(KindInvalid, "changes must be from 0 to %d", MaxReplayChanges)
	}
	return p.next.Replay(ctx, req)
}

func (p checkedPolicy) ShadowSummary(ctx context.Context, req ShadowRequest) (ShadowSummary, error) {
	if err := Authorize(req.Admin, identity.RolePolicyAdmin); err != nil {
		return ShadowSummary{}, err
	}
	return p.next.ShadowSummary(ctx, req)
}

// CheckedAudit is a with the auditor role required of every method and
// its requests checked. It returns a itself when a is already checked.
func CheckedAudit(a Audit) Audit {
	if ca, ok := a.(checkedAudit); ok {
		return ca
	}
	return checkedAudit{a}
}

type checkedAudit struct{ next Audit }

func auditor(id *identity.Identity) error { return Authorize(id, identity.RoleAuditor) }

func errNoEvent() error { return Errorf(KindNotFound, "no such event") }

func (a checkedAudit) Events(ctx context.Context, id *identity.Identity, f AuditFilter) (apiv1.AuditEventPage, error) {
	if err := auditor(id); err != nil {
		return apiv1.AuditEventPage{}, err
	}
	// A typo must not read as "no such events".
	if f.Outcome != "" && !slices.Contains(AuditOutcomes, f.Outcome) {
		return apiv1.AuditEventPage{}, Errorf(KindInvalid, "unknown outcome %q: one of %s", clip(f.Outcome, 64), strings.Join(AuditOutcomes, ", "))
	}
	if f.Phase != "" && !slices.Contains(AuditPhases, f.Phase) {
		return apiv1.AuditEventPage{}, Errorf(KindInvalid, "unknown phase %q: one of %s", clip(f.Phase, 64), strings.Join(AuditPhases, ", "))
	}
	var err error
	if f.Limit, err = pageLimit(f.Limit, AuditDefaultLimit, AuditMaxLimit); err != nil {
		return apiv1.AuditEventPage{}, err
	}
	return a.next.Events(ctx, id, f)
}

func (a checkedAudit) Event(ctx context.Context, id *identity.Identity, eventID string) (*apiv1.AuditEvent, error) {
	if err := auditor(id); err != nil {
		return nil, err
	}
	if !ValidID(eventID) {
		return nil, errNoEvent()
	}
	return a.next.Event(ctx, id, eventID)
}

func (a checkedAudit) Verify(ctx context.Context, id *identity.Identity) (VerifyResult, error) {
	if err := auditor(id); err != nil {
		return VerifyResult{}, err
	}
	return a.next.Verify(ctx, id)
}

func (a checkedAudit) Export(ctx context.Context, id *identity.Identity, req ExportRequest, emit func([]any) error) error {
	if err := auditor(id); err != nil {
		return err
	}
	if req.Format != apiv1.ExportNDJSON && req.Format != apiv1.ExportOPA {
		return Errorf(KindInvalid, `format must be "ndjson" or "opa"`)
	}
	return a.next.Export(ctx, id, req, emit)
}

func (a checkedAudit) Checkpoint(ctx context.Context, id *identity.Identity) ([]byte, error) {
	if err := auditor(id); err != nil {
		return nil, err
	}
	return a.next.Checkpoint(ctx, id)
}

func (a checkedAudit) VerifierKey(ctx context.Context, id *identity.Identity) (string, error) {
	if err := auditor(id); err != nil {
		return "", err
	}
	return a.next.VerifierKey(ctx, id)
}

func (a checkedAudit) InclusionProof(ctx context.Context, id *identity.Identity, eventID string, size uint64) (apiv1.InclusionProof, error) {
	if err := auditor(id); err != nil {
		return apiv1.InclusionProof{}, err
	}
	if size == 0 {
		return apiv1.InclusionProof{}, Errorf(KindInvalid, "size out of range of the log")
	}
	if !ValidID(eventID) {
		return apiv1.InclusionProof{}, Errorf(KindNotFound, "no such event in the log")
	}
	return a.next.InclusionProof(ctx, id, eventID, size)
}

func (a checkedAudit) ConsistencyProof(ctx context.Context, id *identity.Identity, from, to uint64) (apiv1.ConsistencyProof, error) {
	if err := auditor(id); err != nil {
		return apiv1.ConsistencyProof{}, err
	}
	return a.next.ConsistencyProof(ctx, id, from, to)
}

func (a checkedAudit) VerifyCheckpoint(ctx context.Context, id *identity.Identity, note []byte) (any, error) {
	if err := auditor(id); err != nil {
		return nil, err
	}
	return a.next.VerifyCheckpoint(ctx, id, note)
}

func (a checkedAudit) ProveEvent(ctx context.Context, id *identity.Identity, ev *apiv1.AuditEvent) (EventProof, error) {
	if err := auditor(id); err != nil {
		return EventProof{}, err
	}
	if ev == nil || ev.Tenant != id.Tenant {
		return EventProof{}, errNoEvent()
	}
	return a.next.ProveEvent(ctx, id, ev)
}

// clip shortens s to at most n bytes for an error message (%q escapes
// what is left).
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
