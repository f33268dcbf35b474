package pipeline

import (
	"context"
	"reflect"
	"sync/atomic"
	"testing"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/tools"
)

// lockerTool opens boxes that have an owner; an unknown box is an
// *ArgError, and that is also what it answers for a concealed denial.
type lockerTool struct {
	spec tools.Spec
	ran  atomic.Int32
}

var errNoSuchBox = &tools.ArgError{Pointer: "/id", Rule: "not_found: no such box"}

func newLocker() *lockerTool {
	return &lockerTool{spec: tools.Spec{
		Name: "locker", Description: "opens a box", Kind: tools.KindBuiltin, Action: "box.open", Effects: []string{"box.open"},
		InputSchema: `{"type":"object","additionalProperties":false,"required":["id"],"properties":{"id":{"type":"string"}}}`,
	}}
}

func (l *lockerTool) Spec() *tools.Spec { return &l.spec }

func (l *lockerTool) Prepare(_ context.Context, _ *tools.Env, args map[string]any) (tools.Plan, error) {
	id := args["id"].(string)
	owner, ok := map[string]string{"box-1": "alice"}[id]
	if !ok {
		return tools.Plan{}, errNoSuchBox
	}
	return tools.Plan{Args: args, Resources: []tools.Resource{{"type": "box", "id": id, "owner": owner}}, Artifact: id}, nil
}

func (l *lockerTool) Run(context.Context, *tools.Env, any, tools.Limits) (tools.Result, error) {
	l.ran.Add(1)
	return tools.Result{Content: "opened"}, nil
}

func (l *lockerTool) Concealed() *tools.ArgError { return errNoSuchBox }

// concealPolicy lets only a box's owner open it and conceals every other
// denial; its allow carries conceal too, which changes nothing.
const concealPolicy = `package toolgate.authz

default decision := {"allow": false, "conceal": true, "reasons": ["not the owner"], "message": "box-1 belongs to alice"}

decision := {"allow": true, "conceal": true, "reasons": ["the owner"]} if input.resources[0].owner == input.principal.id
`

// A concealed denial answers byte for byte what an unknown target
// answers — single calls, decisions (PDP) and batches alike — while the
// audit log records the denial, its reasons and that it was concealed.
func TestConcealedDenialAnswersLikeAnUnknownTarget(t *testing.T) {
	locker := newLocker()
	f := newFixture(t, map[string]string{"a.rego": allowAll, "b.rego": concealPolicy}, locker)
	bob := &identity.Identity{Tenant: "acme", Principal: "bob", Roles: []string{"developer"}}
	ctx := context.Background()
	// same compares two answers but for their own ids.
	same := func(what string, got, want Response) {
		t.Helper()
		got.CallID, got.DecisionID, want.CallID, want.DecisionID = "", "", "", ""
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: concealed answer %+v differs from the unknown target's %+v", what, got, want)
		}
		if got.Outcome != apiv1.OutcomeInvalidArguments || got.Content != "invalid arguments: /id: not_found: no such box" {
			t.Errorf("%s: %+v, want the unknown target's invalid_arguments", what, got)
		}
	}
	for _, mode := range []string{"call", "decision"} {
		do := f.pl.Call
		if mode == "decision" {
			do = f.pl.Decide
		}
		hidden, err := do(ctx, Request{Identity: bob, Tool: "locker", Arguments: []byte(`{"id":"box-1"}`), CallID: mode + "-hidden"})
		if err != nil {
			t.Fatal(err)
		}
		missing, err := do(ctx, Request{Identity: bob, Tool: "locker", Arguments: []byte(`{"id":"box-404"}`), CallID: mode + "-missing"})
		if err != nil {
			t.Fatal(err)
		}
		same(mode, hidden, missing)

		ev := f.events(t, mode+"-hidden")
		if len(ev) != 1 || ev[0].Outcome != string(apiv1.OutcomeDenied) || !ev[0].Concealed ||
			!reflect.DeepEqual(ev[0].Reasons, []string{"not the owner"}) || ev[0].RequestDigest == "" {
			t.Errorf("%s: the audit log must record the concealed denial: %+v", mode, ev)
		} else if d, _ := ev[0].Decision.(map[string]any); d["conceal"] != true || d["message"] != "box-1 belongs to alice" {
			t.Errorf("%s: decision %v, want the policy's whole decision", mode, ev[0].Decision)
		}
		ev = f.events(t, mode+"-missing")
		if len(ev) != 1 || ev[0].Outcome != string(apiv1.OutcomeInvalidArguments) || ev[0].Concealed {
			t.Errorf("%s: missing box event %+v", mode, ev)
		}
	}

	out := f.pl.Batch(ctx, BatchRequest{Identity: bob, SessionID: "s", Calls: []BatchCall{
		{Tool: "locker", Arguments: []byte(`{"id":"box-1"}`)},
		{Tool: "locker", Arguments: []byte(`{"id":"box-404"}`)},
	}}, true)
	if out.Err != nil || len(out.Results) != 2 {
		t.Fatalf("batch: %+v", out)
	}
	same("batch", out.Results[0], out.Results[1])
	if n := locker.ran.Load(); n != 0 {
		t.Fatalf("a concealed denial ran the tool %d times", n)
	}

	// The owner is allowed: conceal on an allow changes nothing.
	resp, err := f.pl.Call(ctx, Request{Identity: alice, Tool: "locker", Arguments: []byte(`{"id":"box-1"}`), CallID: "owner"})
	if err != nil || resp.Outcome != apiv1.OutcomeOK || resp.Content != "opened" {
		t.Fatalf("owner: %+v %v", resp, err)
	}
	if ev := f.events(t, "owner"); len(ev) != 2 || ev[1].Concealed || ev[0].Concealed {
		t.Errorf("owner's events are marked concealed: %+v", ev)
	}
	res, err := f.log.Verify(ctx, "acme")
	if err != nil || !res.OK {
		t.Fatalf("verify = %+v, %v", res, err)
	}
}

// A tool that cannot say what an unknown target looks like answers a
// denial with conceal as the denial it is.
func TestConcealIsADenialForToolsThatCannotConceal(t *testing.T) {
	probe := newProbe()
	f := newFixture(t, map[string]string{"a.rego": allowAll, "b.rego": concealPolicy}, probe)
	resp, err := f.pl.Call(context.Background(), Request{Identity: alice, Tool: "probe", Arguments: []byte(`{"text":"x"}`), CallID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Outcome != apiv1.OutcomeDenied || resp.Content != "box-1 belongs to alice" || probe.ran.Load() != 0 {
		t.Fatalf("got %+v, want the policy's denial", resp)
	}
	if ev := f.events(t, "p"); len(ev) != 1 || ev[0].Concealed || ev[0].Outcome != string(apiv1.OutcomeDenied) {
		t.Errorf("events %+v", ev)
	}
}
