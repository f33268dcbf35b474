package backend

import (
	"context"
	"testing"

	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/service"
)

// The constructors hand out only checked services: a caller without the
// role is refused before the implementation touches its pipeline, log
// or engine (all nil here: reaching them would panic).
func TestConstructorsReturnCheckedServices(t *testing.T) {
	ctx := context.Background()
	agent := &identity.Identity{Tenant: "acme", Principal: "p"}
	errOf := func(_ any, err error) error { return err }
	for name, call := range map[string]func() error{
		"Audit.Verify": func() error { return errOf(NewAudit(AuditOptions{}).Verify(ctx, agent)) },
		"Audit.Events": func() error { return errOf(NewAudit(AuditOptions{}).Events(ctx, agent, service.AuditFilter{})) },
		"Policy.Info":  func() error { return errOf(NewPolicy(PolicyOptions{}).Info(ctx, agent)) },
		"Approvals.Approve": func() error {
			return errOf(NewApprovals(nil).Approve(ctx, service.ApprovalStep{Identity: agent, ID: "a1"}))
		},
		"Approvals.List": func() error { return errOf(NewApprovals(nil).Approvals(ctx, agent, service.ApprovalFilter{})) },
		"Calls.Call(call_id)": func() error {
			return errOf(NewCalls(nil).Call(ctx, service.CallRequest{Identity: agent, Tool: "t", CallID: "a b"}))
		},
	} {
		want := service.KindForbidden
		if name == "Calls.Call(call_id)" {
			want = service.KindInvalid
		}
		if k := service.KindOf(call()); k != want {
			t.Errorf("%s: %s, want %s", name, k, want)
		}
	}
}
