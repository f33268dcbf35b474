package service

import (
	"context"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/identity"
)

// inner is every service, recording what reached it: what the checks
// let through is all an implementation ever reads or changes.
type inner struct{ reached []string }

func (f *inner) hit(m string) { f.reached = append(f.reached, m) }

func (f *inner) Tools(context.Context, *identity.Identity, string) ([]apiv1.Tool, error) {
	f.hit("Tools")
	return nil, nil
}
func (f *inner) Call(context.Context, CallRequest) (apiv1.CallResponse, error) {
	f.hit("Call")
	return apiv1.CallResponse{}, nil
}
func (f *inner) Decide(context.Context, CallRequest) (apiv1.DecisionResponse, error) {
	f.hit("Decide")
	return apiv1.DecisionResponse{}, nil
}
func (f *inner) Batch(context.Context, BatchRequest, bool) (BatchResult, error) {
	f.hit("Batch")
	return BatchResult{}, nil
}
func (f *inner) Approvals(context.Context, *identity.Identity, ApprovalFilter) ([]apiv1.Approval, error) {
	f.hit("Approvals")
	return nil, nil
}
func (f *inner) Approval(context.Context, *identity.Identity, string) (apiv1.Approval, error) {
	f.hit("Approval")
	return apiv1.Approval{}, nil
}
func (f *inner) Approve(context.Context, ApprovalStep) (apiv1.Approval, error) {
	f.hit("Approve")
	return apiv1.Approval{}, nil
}
func (f *inner) Deny(context.Context, ApprovalStep) (apiv1.Approval, error) {
	f.hit("Deny")
	return apiv1.Approval{}, nil
}
func (f *inner) Answer(context.Context, AnswerStep) (apiv1.Question, error) {
	f.hit("Answer")
	return apiv1.Question{}, nil
}
func (f *inner) Questions(context.Context, *identity.Identity, QuestionFilter) ([]PendingQuestion, error) {
	f.hit("Questions")
	return nil, nil
}
func (f *inner) CallStatus(context.Context, *identity.Identity, string, time.Duration) (apiv1.CallStatus, error) {
	f.hit("CallStatus")
	return apiv1.CallStatus{}, nil
}
func (f *inner) CallQuestion(context.Context, *identity.Identity, string) (AskedQuestion, error) {
	f.hit("CallQuestion")
	return AskedQuestion{}, nil
}
func (f *inner) Info(context.Context, *identity.Identity) (apiv1.PolicyInfo, error) {
	f.hit("Info")
	return apiv1.PolicyInfo{}, nil
}
func (f *inner) Evaluate(context.Context, EvalRequest) (apiv1.PolicyEvalResponse, error) {
	f.hit("Evaluate")
	return apiv1.PolicyEvalResponse{}, nil
}
func (f *inner) Replay(context.Context, ReplayRequest) (*ReplayReport, error) {
	f.hit("Replay")
	return &ReplayReport{}, nil
}
func (f *inner) ShadowSummary(context.Context, ShadowRequest) (ShadowSummary, error) {
	f.hit("ShadowSummary")
	return ShadowSummary{}, nil
}
func (f *inner) Events(context.Context, *identity.Identity, AuditFilter) (apiv1.AuditEventPage, error) {
	f.hit("Events")
	return apiv1.AuditEventPage{}, nil
}
func (f *inner) Event(context.Context, *identity.Identity, string) (*apiv1.AuditEvent, error) {
	f.hit("Event")
	return nil, nil
}
func (f *inner) Verify(context.Context, *identity.Identity) (VerifyResult, error) {
	f.hit("Verify")
	return VerifyResult{}, nil
}
func (f *inner) Export(context.Context, *identity.Identity, ExportRequest, func([]any) error) error {
	f.hit("Export")
	return nil
}
func (f *inner) Checkpoint(context.Context, *identity.Identity) ([]byte, error) {
	f.hit("Checkpoint")
	return nil, nil
}
func (f *inner) VerifierKey(context.Context, *identity.Identity) (string, error) {
	f.hit("VerifierKey")
	return "", nil
}
func (f *inner) InclusionProof(context.Context, *identity.Identity, string, uint64) (apiv1.InclusionProof, error) {
	f.hit("InclusionProof")
	return apiv1.InclusionProof{}, nil
}
func (f *inner) ConsistencyProof(context.Context, *identity.Identity, uint64, uint64) (apiv1.ConsistencyProof, error) {
	f.hit("ConsistencyProof")
	return apiv1.ConsistencyProof{}, nil
}
func (f *inner) VerifyCheckpoint(context.Context, *identity.Identity, []byte) (any, error) {
	f.hit("VerifyCheckpoint")
	return nil, nil
}
func (f *inner) ProveEvent(context.Context, *identity.Identity, *apiv1.AuditEvent) (EventProof, error) {
	f.hit("ProveEvent")
	return EventProof{}, nil
}

// guarded is every method that needs a management role, called as id
// with a request that is otherwise valid.
func guarded(s Services, id *identity.Identity) map[string]struct {
	role string
	call func() error
} {
	ctx := context.Background()
	type g = struct {
		role string
		call func() error
	}
	errOf := func(_ any, err error) error { return err }
	ev := &apiv1.AuditEvent{ID: "e1", Tenant: "acme"}
	return map[string]g{
		"Approvals": {identity.RoleApprover, func() error { return errOf(s.Approvals.Approvals(ctx, id, ApprovalFilter{})) }},
		"Approval":  {identity.RoleApprover, func() error { return errOf(s.Approvals.Approval(ctx, id, "a1")) }},
		"Approve":   {identity.RoleApprover, func() error { return errOf(s.Approvals.Approve(ctx, ApprovalStep{Identity: id, ID: "a1"})) }},
		"Deny":      {identity.RoleApprover, func() error { return errOf(s.Approvals.Deny(ctx, ApprovalStep{Identity: id, ID: "a1"})) }},
		"Info":      {identity.RolePolicyAdmin, func() error { return errOf(s.Policy.Info(ctx, id)) }},
		"Evaluate": {identity.RolePolicyAdmin, func() error {
			return errOf(s.Policy.Evaluate(ctx, EvalRequest{Admin: id, Document: map[string]any{}}))
		}},
		"Replay": {identity.RolePolicyAdmin, func() error {
			return errOf(s.Policy.Replay(ctx, ReplayRequest{Admin: id, Shadow: true}))
		}},
		"ShadowSummary":    {identity.RolePolicyAdmin, func() error { return errOf(s.Policy.ShadowSummary(ctx, ShadowRequest{Admin: id})) }},
		"Events":           {identity.RoleAuditor, func() error { return errOf(s.Audit.Events(ctx, id, AuditFilter{})) }},
		"Event":            {identity.RoleAuditor, func() error { return errOf(s.Audit.Event(ctx, id, "e1")) }},
		"Verify":           {identity.RoleAuditor, func() error { return errOf(s.Audit.Verify(ctx, id)) }},
		"Export":           {identity.RoleAuditor, func() error { return s.Audit.Export(ctx, id, ExportRequest{Format: apiv1.ExportNDJSON}, nil) }},
		"Checkpoint":       {identity.RoleAuditor, func() error { return errOf(s.Audit.Checkpoint(ctx, id)) }},
		"VerifierKey":      {identity.RoleAuditor, func() error { return errOf(s.Audit.VerifierKey(ctx, id)) }},
		"InclusionProof":   {identity.RoleAuditor, func() error { return errOf(s.Audit.InclusionProof(ctx, id, "e1", 1)) }},
		"ConsistencyProof": {identity.RoleAuditor, func() error { return errOf(s.Audit.ConsistencyProof(ctx, id, 1, 2)) }},
		"VerifyCheckpoint": {identity.RoleAuditor, func() error { return errOf(s.Audit.VerifyCheckpoint(ctx, id, []byte("n"))) }},
		"ProveEvent":       {identity.RoleAuditor, func() error { return errOf(s.Audit.ProveEvent(ctx, id, ev)) }},
	}
}

func checkedFake() (*inner, Services) {
	f := &inner{}
	return f, Checked(Services{Calls: f, Approvals: f, Policy: f, Audit: f})
}

// Every management method refuses a caller without its role — with
// KindForbidden, before the implementation reads or changes anything —
// also when the caller holds the other management roles; the role alone
// lets the call through.
func TestEveryGuardedMethodNeedsItsRole(t *testing.T) {
	all := []string{identity.RoleAuditor, identity.RoleApprover, identity.RolePolicyAdmin}
	_, s := checkedFake()
	if n := len(guarded(s, &identity.Identity{})); n != 18 {
		t.Fatalf("%d guarded methods listed, want 18: a new one must be listed here", n)
	}
	for name, g := range guarded(s, &identity.Identity{}) {
		var others []string
		for _, r := range all {
			if r != g.role {
				others = append(others, r)
			}
		}
		for _, id := range []*identity.Identity{nil, {Tenant: "acme", Principal: "p"}, {Tenant: "acme", Principal: "p", Roles: others}} {
			f, s := checkedFake()
			err := guarded(s, id)[name].call()
			if e := As(err); e.Kind != KindForbidden || e.Message != "this route requires the "+g.role+" role" {
				t.Errorf("%s as %+v: %v, want forbidden", name, id, err)
			}
			if len(f.reached) != 0 {
				t.Errorf("%s as %+v reached the implementation: %v", name, id, f.reached)
			}
		}
		f, s := checkedFake()
		if err := guarded(s, &identity.Identity{Tenant: "acme", Roles: []string{g.role}})[name].call(); err != nil {
			t.Errorf("%s with %s: %v", name, g.role, err)
		}
		if len(f.reached) != 1 || f.reached[0] != name {
			t.Errorf("%s with %s reached %v", name, g.role, f.reached)
		}
	}
}

// Requests out of syntax or bounds stop at the service with the kind a
// front door maps to the status of today's routes; an id that cannot be
// an id names nothing (404, as an unknown one).
func TestRequestsAreCheckedBeforeTheImplementation(t *testing.T) {
	ctx := context.Background()
	agent := &identity.Identity{Tenant: "acme", Principal: "p"}
	approver := &identity.Identity{Tenant: "acme", Principal: "p", Roles: []string{identity.RoleApprover}}
	auditorID := &identity.Identity{Tenant: "acme", Principal: "p", Roles: []string{identity.RoleAuditor}}
	admin := &identity.Identity{Tenant: "acme", Principal: "p", Roles: []string{identity.RolePolicyAdmin}}
	errOf := func(_ any, err error) error { return err }
	long := strings.Repeat("x", 129)
	for _, c := range []struct {
		name string
		call func(Services) error
		kind Kind
		msg  string
	}{
		{"no identity", func(s Services) error { return errOf(s.Calls.Call(ctx, CallRequest{Tool: "t"})) }, KindUnauthenticated, "a valid credential"},
		{"call_id", func(s Services) error {
			return errOf(s.Calls.Call(ctx, CallRequest{Identity: agent, Tool: "t", CallID: "a b"}))
		}, KindInvalid, "call_id must be 1-128 characters"},
		{"session_id", func(s Services) error {
			return errOf(s.Calls.Decide(ctx, CallRequest{Identity: agent, Tool: "t", SessionID: long}))
		}, KindInvalid, "session_id must be 1-128 characters"},
		{"tools session", func(s Services) error { return errOf(s.Calls.Tools(ctx, agent, "-x")) }, KindInvalid, "session_id must be"},
		{"empty batch", func(s Services) error { return errOf(s.Calls.Batch(ctx, BatchRequest{Identity: agent}, true)) }, KindInvalid, "calls must not be empty"},
		{"batch tool", func(s Services) error {
			return errOf(s.Calls.Batch(ctx, BatchRequest{Identity: agent, Calls: []BatchCall{{Tool: "t"}, {Tool: long}}}, true))
		}, KindInvalid, "calls[1].tool must be a tool name of 1-128 bytes"},
		{"batch call_id", func(s Services) error {
			return errOf(s.Calls.Batch(ctx, BatchRequest{Identity: agent, Calls: []BatchCall{{Tool: "t", CallID: "a b"}}}, false))
		}, KindInvalid, "calls[0].call_id must be 1-128 characters"},
		{"batch repeated call_id", func(s Services) error {
			return errOf(s.Calls.Batch(ctx, BatchRequest{Identity: agent, Calls: []BatchCall{{Tool: "t", CallID: "c"}, {Tool: "u", CallID: "c"}}}, true))
		}, KindInvalid, "calls[1].call_id repeats the call_id of calls[0]"},
		{"audit outcome typo", func(s Services) error {
			return errOf(s.Audit.Events(ctx, auditorID, AuditFilter{Outcome: "deny"}))
		}, KindInvalid, `unknown outcome "deny": one of allow, denied,`},
		{"audit outcome list", func(s Services) error {
			return errOf(s.Audit.Events(ctx, auditorID, AuditFilter{Outcome: "denied,unavailable"}))
		}, KindInvalid, `unknown outcome "denied,unavailable"`},
		{"audit phase typo", func(s Services) error {
			return errOf(s.Audit.Events(ctx, auditorID, AuditFilter{Phase: "decisions"}))
		}, KindInvalid, `unknown phase "decisions": one of decision, result, approval, question, definition`},
		{"approval status", func(s Services) error {
			return errOf(s.Approvals.Approvals(ctx, approver, ApprovalFilter{Status: "lost"}))
		}, KindInvalid, "status must be"},
		{"approval limit", func(s Services) error {
			return errOf(s.Approvals.Approvals(ctx, approver, ApprovalFilter{Limit: 1001}))
		}, KindInvalid, "limit must be an integer from 1 to 1000"},
		{"approval id", func(s Services) error { return errOf(s.Approvals.Approval(ctx, approver, long)) }, KindNotFound, "no such approval"},
		{"approve id", func(s Services) error {
			return errOf(s.Approvals.Approve(ctx, ApprovalStep{Identity: approver, ID: "../a"}))
		}, KindNotFound, "no such approval"},
		{"comment", func(s Services) error {
			return errOf(s.Approvals.Deny(ctx, ApprovalStep{Identity: approver, ID: "a1", Comment: strings.Repeat("x", 1001)}))
		}, KindInvalid, "comment must be at most 1000 bytes"},
		{"comment UTF-8", func(s Services) error {
			return errOf(s.Approvals.Approve(ctx, ApprovalStep{Identity: approver, ID: "a1", Comment: "\xff"}))
		}, KindInvalid, "comment must be at most 1000 bytes"},
		{"empty answer", func(s Services) error { return errOf(s.Approvals.Answer(ctx, AnswerStep{Identity: agent, ID: "q1"})) }, KindInvalid, "answer must be 1 to 4000 bytes"},
		{"long answer", func(s Services) error {
			return errOf(s.Approvals.Answer(ctx, AnswerStep{Identity: agent, ID: "q1", Answer: strings.Repeat("x", 4001)}))
		}, KindInvalid, "answer must be 1 to 4000 bytes"},
		{"question id", func(s Services) error {
			return errOf(s.Approvals.Answer(ctx, AnswerStep{Identity: agent, ID: "q 1", Answer: "y"}))
		}, KindNotFound, "no such question"},
		{"question limit", func(s Services) error { return errOf(s.Approvals.Questions(ctx, agent, QuestionFilter{Limit: -1})) }, KindInvalid, "limit must be"},
		{"poll wait", func(s Services) error {
			return errOf(s.Approvals.CallStatus(ctx, agent, "c1", MaxPollWait+time.Second))
		}, KindInvalid, "wait must be"},
		{"poll call id", func(s Services) error { return errOf(s.Approvals.CallStatus(ctx, agent, "", 0)) }, KindNotFound, "no such call"},
		{"asked call id", func(s Services) error { return errOf(s.Approvals.CallQuestion(ctx, agent, long)) }, KindNotFound, "no such question"},
		{"audit limit", func(s Services) error { return errOf(s.Audit.Events(ctx, auditorID, AuditFilter{Limit: 1001})) }, KindInvalid, "limit must be an integer from 1 to 1000"},
		{"event id", func(s Services) error { return errOf(s.Audit.Event(ctx, auditorID, "a/b")) }, KindNotFound, "no such event"},
		{"export format", func(s Services) error { return s.Audit.Export(ctx, auditorID, ExportRequest{Format: "csv"}, nil) }, KindInvalid, "format must be"},
		{"proof size", func(s Services) error { return errOf(s.Audit.InclusionProof(ctx, auditorID, "e1", 0)) }, KindInvalid, "size out of range"},
		{"proof id", func(s Services) error { return errOf(s.Audit.InclusionProof(ctx, auditorID, "", 1)) }, KindNotFound, "no such event"},
		{"other tenant's event", func(s Services) error {
			return errOf(s.Audit.ProveEvent(ctx, auditorID, &apiv1.AuditEvent{ID: "e1", Tenant: "other"}))
		}, KindNotFound, "no such event"},
		{"explain", func(s Services) error {
			return errOf(s.Policy.Evaluate(ctx, EvalRequest{Admin: admin, Document: map[string]any{}, Explain: "all"}))
		}, KindInvalid, "explain must be"},
		{"eval session", func(s Services) error {
			return errOf(s.Policy.Evaluate(ctx, EvalRequest{Admin: admin, Tool: "t", As: &identity.Identity{Principal: "b"}, SessionID: "a b"}))
		}, KindInvalid, "session_id must be 1-128 characters"},
		{"eval both", func(s Services) error {
			return errOf(s.Policy.Evaluate(ctx, EvalRequest{Admin: admin, Document: map[string]any{}, Tool: "t", As: &identity.Identity{Principal: "b"}}))
		}, KindInvalid, "give either"},
		{"replay both", func(s Services) error {
			return errOf(s.Policy.Replay(ctx, ReplayRequest{Admin: admin, Shadow: true, Modules: map[string]string{"a.rego": ""}}))
		}, KindInvalid, "give either"},
		{"replay changes", func(s Services) error {
			return errOf(s.Policy.Replay(ctx, ReplayRequest{Admin: admin, Shadow: true, Changes: MaxReplayChanges + 1}))
		}, KindInvalid, "changes must be"},
	} {
		f, s := checkedFake()
		e := As(c.call(s))
		if e.Kind != c.kind || !strings.Contains(e.Message, c.msg) {
			t.Errorf("%s: %s %q, want %s %q", c.name, e.Kind, e.Message, c.kind, c.msg)
		}
		if len(f.reached) != 0 {
			t.Errorf("%s reached the implementation: %v", c.name, f.reached)
		}
	}
}

// Checking is idempotent: a front door that wraps the services it is
// given again does not check twice (nor change what they answer).
func TestCheckedIsIdempotent(t *testing.T) {
	f := &inner{}
	a := CheckedAudit(f)
	if CheckedAudit(a) != a || CheckedPolicy(CheckedPolicy(f)) != CheckedPolicy(f) {
		t.Error("wrapping a checked service wraps it again")
	}
}
