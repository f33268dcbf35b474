package pipeline

import (
	"context"
	"errors"
	"testing"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/approval"
	"github.com/toolgate/toolgate/internal/identity"
)

// authzHold holds every call; the obligation comes from data.ttl_ms when
// set. A second decision (input.approval) allows.
const authzHold = `package toolgate.authz

default ttl := {}

ttl := {"approval_ttl_ms": data.ttl_ms} if data.ttl_ms

decision := {"allow": true, "approval_required": true, "reasons": ["held"], "obligations": ttl}
`

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func holdingFixture(t *testing.T, data string) (*fixture, *probeTool) {
	t.Helper()
	probe := newProbe()
	policy := map[string]string{"a.rego": allowAll, "b.rego": authzHold}
	if data != "" {
		policy["data.json"] = data
	}
	f := newFixture(t, policy, probe)
	f.pl.o.Approvals, f.pl.o.ApprovalTTL = f.db.Approvals(), time.Hour
	f.pl.o.Now = func() time.Time { return t0 }
	return f, probe
}

func TestAnObligationMayShortenTheApprovalTTLButNeverLengthenIt(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       time.Duration
	}{
		{"the configured ttl", "", time.Hour},
		{"a shorter obligation", `{"ttl_ms": 60000}`, time.Minute},
		{"a longer obligation is ignored", `{"ttl_ms": 7200000}`, time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, probe := holdingFixture(t, tc.data)
			resp, err := f.pl.Call(context.Background(), Request{Identity: alice, Tool: "probe", Arguments: []byte(`{"text":"x"}`)})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Outcome != apiv1.OutcomeApprovalRequired || probe.ran.Load() != 0 {
				t.Fatalf("outcome %s, ran %d", resp.Outcome, probe.ran.Load())
			}
			a, err := f.pl.o.Approvals.Get(context.Background(), "acme", resp.Data["approval_id"].(string))
			if err != nil {
				t.Fatal(err)
			}
			if got := a.ExpiresAt.Sub(t0); got != tc.want {
				t.Fatalf("expires after %s, want %s", got, tc.want)
			}
		})
	}
}

func TestDecisionsInPDPModeHoldNothing(t *testing.T) {
	f, _ := holdingFixture(t, "")
	resp, err := f.pl.Decide(context.Background(), Request{Identity: alice, Tool: "probe", Arguments: []byte(`{"text":"x"}`)})
	if err != nil || resp.Outcome != apiv1.OutcomeApprovalRequired || resp.Data != nil {
		t.Fatalf("decide: %+v %v", resp, err)
	}
	l, _ := f.pl.o.Approvals.List(context.Background(), "acme", approval.Filter{})
	if len(l) != 0 {
		t.Fatalf("PDP mode held %d calls", len(l))
	}
}

func TestApprovalRunsThePreparedArtifactOfTheHeldCall(t *testing.T) {
	f, probe := holdingFixture(t, "")
	resp, err := f.pl.Call(context.Background(), Request{Identity: alice, Tool: "probe", Arguments: []byte(`{"text":"ls -la"}`), CallID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	bob := &identity.Identity{Tenant: "acme", Principal: "bob", Roles: []string{"approver"}}
	a, err := f.pl.Approve(context.Background(), ApprovalStep{Identity: bob, ID: resp.Data["approval_id"].(string)})
	if err != nil {
		t.Fatal(err)
	}
	if a.Outcome != "ok" || a.Result.Content != "ran ls -la" || probe.ran.Load() != 1 || probe.lastText.Load() != "ls -la" {
		t.Fatalf("approved: %+v %+v ran %d", a, a.Result, probe.ran.Load())
	}
	if _, err := f.pl.Approve(context.Background(), ApprovalStep{Identity: bob, ID: a.ID}); !errors.Is(err, ErrApprovalDecided) {
		t.Fatalf("second approval: %v", err)
	}
	if probe.ran.Load() != 1 {
		t.Fatal("ran twice")
	}
}

func TestApprovalWithoutPolicyFailsClosedAndStaysPending(t *testing.T) {
	f, probe := holdingFixture(t, "")
	resp, err := f.pl.Call(context.Background(), Request{Identity: alice, Tool: "probe", Arguments: []byte(`{"text":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	f.pl.o.Engine = newFixture(t, nil).pl.o.Engine // no policy loaded
	bob := &identity.Identity{Tenant: "acme", Principal: "bob", Roles: []string{"approver"}}
	id := resp.Data["approval_id"].(string)
	if _, err := f.pl.Approve(context.Background(), ApprovalStep{Identity: bob, ID: id}); !errors.Is(err, ErrPolicy) {
		t.Fatalf("approve without policy: %v", err)
	}
	a, _ := f.pl.o.Approvals.Get(context.Background(), "acme", id)
	if a.Status != approval.StatusPending || probe.ran.Load() != 0 {
		t.Fatalf("after a failed approval: %s, ran %d", a.Status, probe.ran.Load())
	}
}

// A batch call whose decision is approval_required is held exactly as a
// single call is: stored, answered with its approval id, run once when
// approved; its siblings are not held back by it.
func TestBatchHoldsApprovalRequiredCallsLikeSingleCalls(t *testing.T) {
	f, probe := holdingFixture(t, "")
	out := f.pl.Batch(context.Background(), BatchRequest{Identity: alice, SessionID: "s", Calls: []BatchCall{
		{Tool: "probe", Arguments: []byte(`{"text":"one"}`), CallID: "h1"},
		{Tool: "probe", Arguments: []byte(`{"text":"two"}`), CallID: "h2"},
	}}, true)
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	ids := map[string]bool{}
	for i, r := range out.Results {
		id, _ := r.Data["approval_id"].(string)
		if r.Outcome != apiv1.OutcomeApprovalRequired || r.Content != TextApprovalRequired || id == "" || r.Data["expires_at"] == nil {
			t.Fatalf("call %d: %+v, want held with an approval id", i, r)
		}
		ids[id] = true
		a, err := f.pl.CallApproval(context.Background(), alice, r.CallID)
		if err != nil || a.ID != id || a.Status != approval.StatusPending || a.Digest != r.RequestDigest {
			t.Fatalf("call %d: stored approval %+v (%v), want pending %s of digest %s", i, a, err, id, r.RequestDigest)
		}
		evs := f.events(t, r.CallID)
		if len(evs) != 1 || evs[0].Outcome != string(apiv1.OutcomeApprovalRequired) || evs[0].Approval == nil || evs[0].Approval.ID != id {
			t.Fatalf("call %d: events %+v, want one decision event naming the approval", i, evs)
		}
	}
	if len(ids) != 2 || probe.ran.Load() != 0 {
		t.Fatalf("approval ids %v, ran %d", ids, probe.ran.Load())
	}

	bob := &identity.Identity{Tenant: "acme", Principal: "bob", Roles: []string{"approver"}}
	a, err := f.pl.Approve(context.Background(), ApprovalStep{Identity: bob, ID: out.Results[1].Data["approval_id"].(string)})
	if err != nil {
		t.Fatal(err)
	}
	if a.Outcome != "ok" || probe.ran.Load() != 1 || probe.lastText.Load() != "two" {
		t.Fatalf("approved: %+v, ran %d", a, probe.ran.Load())
	}
}
