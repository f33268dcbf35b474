package pipeline

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/decision"
	"github.com/toolgate/toolgate/internal/invoke"
	"github.com/toolgate/toolgate/internal/prepare"
	"github.com/toolgate/toolgate/internal/tools"
)

// These tests run the pipeline on fakes of the interfaces it declares
// (Policy, Revision, AuditLog): no Rego is compiled and no database is
// opened, so each runs in microseconds and says exactly which dependency
// failed.

// fakePolicy serves rev, or err when it is set (no revision loaded).
type fakePolicy struct {
	rev *fakeRevision
	err error
}

func (p fakePolicy) Current() (Revision, error) {
	if p.err != nil {
		return nil, p.err
	}
	return p.rev, nil
}

// fakeRevision offers every tool and decides dec; availErr and decideErr
// make those evaluations fail.
type fakeRevision struct {
	dec                 decision.Decision
	availErr, decideErr error
}

func (r *fakeRevision) ID() string { return "fake-revision" }
func (r *fakeRevision) Available(context.Context, ast.Value, ...decision.EvalOption) (bool, error) {
	return r.availErr == nil, r.availErr
}
func (r *fakeRevision) Decide(context.Context, ast.Value, ...decision.EvalOption) (decision.Decision, error) {
	return r.dec, r.decideErr
}
func (r *fakeRevision) Mask(context.Context, ast.Value, ...decision.EvalOption) ([]string, error) {
	return nil, nil
}
func (r *fakeRevision) Evaluate(context.Context, ast.Value, string) (*decision.Evaluation, error) {
	return nil, errors.New("not evaluated by these tests")
}

// fakeLog records the events appended; err makes every append fail.
type fakeLog struct {
	mu     sync.Mutex
	events []*audit.Event
	err    error
}

func (l *fakeLog) Append(ctx context.Context, ev *audit.Event) error {
	return l.AppendWith(ctx, ev, nil)
}
func (l *fakeLog) AppendWith(_ context.Context, ev *audit.Event, _ any) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	l.events = append(l.events, ev)
	return nil
}
func (l *fakeLog) Query(context.Context, string, audit.Filter) (audit.Page, error) {
	return audit.Page{}, nil
}

func (l *fakeLog) phases() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, ev := range l.events {
		out = append(out, ev.Phase+":"+ev.Outcome)
	}
	return out
}

func onFakes(t *testing.T, pol Policy, log AuditLog) (*Pipeline, *probeTool) {
	t.Helper()
	probe := newProbe()
	reg, err := tools.NewRegistry(probe)
	if err != nil {
		t.Fatal(err)
	}
	prep, err := prepare.New(reg, prepare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return New(Options{
		Registry: reg, Envs: map[string]*tools.Env{"acme": {Tenant: "acme"}},
		Engine: pol, Preparer: prep, Invoker: invoke.New(invoke.Options{}), Audit: log,
	}), probe
}

var allowed = decision.Decision{Allow: true, Reasons: []string{"fake allows"}}

func probeCall() Request {
	return Request{Identity: alice, Tool: "probe", Arguments: []byte(`{"text":"hi"}`)}
}

// The fakes are faithful enough: an allowed call runs once, after its
// decision event and before its result event.
func TestOnFakesAnAllowedCallRunsOnceBetweenItsEvents(t *testing.T) {
	log := &fakeLog{}
	var atRun []string
	pl, probe := onFakes(t, fakePolicy{rev: &fakeRevision{dec: allowed}}, log)
	probe.onRun = func(context.Context) error { atRun = log.phases(); return nil }
	resp, err := pl.Call(context.Background(), probeCall())
	if err != nil || resp.Outcome != apiv1.OutcomeOK || probe.ran.Load() != 1 {
		t.Fatalf("call: %+v %v, ran %d", resp, err, probe.ran.Load())
	}
	if len(atRun) != 1 || atRun[0] != "decision:allow" {
		t.Errorf("events committed when the tool ran: %v, want the decision alone", atRun)
	}
	if got := log.phases(); len(got) != 2 || got[1] != "result:ok" {
		t.Errorf("events: %v", got)
	}
}

// No policy loaded, or an evaluation that fails: the gateway fails
// closed — ErrPolicy, nothing run, nothing audited as allowed.
func TestOnFakesThePolicyFailingFailsClosed(t *testing.T) {
	boom := errors.New("rego_type_error")
	for name, pol := range map[string]fakePolicy{
		"no revision":   {err: errors.New("no policy loaded")},
		"availability":  {rev: &fakeRevision{dec: allowed, availErr: boom}},
		"authorization": {rev: &fakeRevision{dec: allowed, decideErr: boom}},
	} {
		log := &fakeLog{}
		pl, probe := onFakes(t, pol, log)
		for _, run := range []bool{true, false} {
			var err error
			if run {
				_, err = pl.Call(context.Background(), probeCall())
			} else {
				_, err = pl.Decide(context.Background(), probeCall())
			}
			if !errors.Is(err, ErrPolicy) {
				t.Errorf("%s (run %v): %v, want ErrPolicy", name, run, err)
			}
		}
		if probe.ran.Load() != 0 {
			t.Errorf("%s: the tool ran", name)
		}
		for _, ph := range log.phases() {
			if ph == "decision:allow" || ph == "result:ok" {
				t.Errorf("%s: audited %s", name, ph)
			}
		}
	}
}

// The decision event cannot be committed: nothing runs, and the caller
// learns that the audit log failed.
func TestOnFakesNothingRunsWhenTheDecisionCannotBeAudited(t *testing.T) {
	log := &fakeLog{err: errors.New("disk full")}
	pl, probe := onFakes(t, fakePolicy{rev: &fakeRevision{dec: allowed}}, log)
	_, err := pl.Call(context.Background(), probeCall())
	if !errors.Is(err, ErrAudit) {
		t.Fatalf("call: %v, want ErrAudit", err)
	}
	if probe.ran.Load() != 0 {
		t.Error("the tool ran without its decision event")
	}
	log.err = audit.ErrOverloaded
	if _, err := pl.Call(context.Background(), probeCall()); !errors.Is(err, ErrOverloaded) || probe.ran.Load() != 0 {
		t.Errorf("an overloaded log: %v, ran %d", err, probe.ran.Load())
	}
}
