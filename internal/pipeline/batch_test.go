package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/tools"
)

// targetTool touches one file resource named by its arguments and runs a
// hook that the test uses to act at the exact moment a call runs.
type targetTool struct {
	run func(ctx context.Context, name string) error
}

type targetArtifact struct{ name string }

func (*targetTool) Spec() *tools.Spec {
	return &tools.Spec{
		Name: "target", Description: "test target", Kind: tools.KindBuiltin, Action: "test.target", Effects: []string{"test.target"},
		InputSchema: `{"type":"object","additionalProperties":false,"required":["name","path","access"],
"properties":{"name":{"type":"string"},"path":{"type":"string"},"access":{"enum":["read","write"]}}}`,
	}
}

func (*targetTool) Prepare(_ context.Context, _ *tools.Env, args map[string]any) (tools.Plan, error) {
	return tools.Plan{
		Args:      args,
		Resources: []tools.Resource{{"type": "file", "path": args["path"], "access": args["access"]}},
		Artifact:  targetArtifact{args["name"].(string)},
	}, nil
}

func (t *targetTool) Run(ctx context.Context, _ *tools.Env, a any, _ tools.Limits) (tools.Result, error) {
	name := a.(targetArtifact).name
	if t.run != nil {
		if err := t.run(ctx, name); err != nil {
			return tools.Result{}, err
		}
	}
	return tools.Result{Content: "ran " + name}, nil
}

func targetCall(name, path, access string) BatchCall {
	return BatchCall{Tool: "target", CallID: name, Arguments: fmt.Appendf(nil, `{"name":%q,"path":%q,"access":%q}`, name, path, access)}
}

// withConcurrency rebuilds the fixture's pipeline with another tenant
// concurrency limit.
func (f *fixture) withConcurrency(n int) {
	o := f.pl.o
	o.TenantConcurrency = n
	f.pl = New(o)
}

// eventually waits for cond, failing the test if it does not hold within a
// generous bound (a guard against hanging, not a timing assertion).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		runtime.Gosched()
		time.Sleep(time.Millisecond)
	}
}

func TestBatchAnswersInRequestOrder(t *testing.T) {
	tt := &targetTool{}
	firstMayFinish := make(chan struct{})
	tt.run = func(ctx context.Context, name string) error {
		switch name {
		case "first":
			<-firstMayFinish // finishes after every sibling
		case "last":
			close(firstMayFinish)
		}
		return nil
	}
	f := newFixture(t, map[string]string{"a.rego": allowAll, "b.rego": authzAllow}, tt)
	out := f.pl.Batch(context.Background(), BatchRequest{Identity: alice, SessionID: "s", Calls: []BatchCall{
		targetCall("first", "a", "read"),
		{Tool: "no-such-tool", Arguments: []byte(`{}`), CallID: "unknown"},
		{Tool: "target", Arguments: []byte(`{"name":1}`), CallID: "invalid"},
		targetCall("last", "b", "read"),
	}}, true)
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	want := []struct {
		id      string
		outcome apiv1.Outcome
		content string
	}{
		{"first", "ok", "ran first"},
		{"unknown", apiv1.OutcomeUnavailable, TextUnavailable},
		{"invalid", apiv1.OutcomeInvalidArguments, ""},
		{"last", "ok", "ran last"},
	}
	for i, w := range want {
		r := out.Results[i]
		if r.CallID != w.id || r.Outcome != w.outcome || (w.content != "" && r.Content != w.content) {
			t.Errorf("result %d = %s/%s/%q, want %s/%s/%q", i, r.CallID, r.Outcome, r.Content, w.id, w.outcome, w.content)
		}
	}
	// Each call is audited on its own, exactly like a single call.
	for _, id := range []string{"first", "last"} {
		if evs := f.events(t, id); len(evs) != 2 || evs[0].Phase != audit.PhaseResult || evs[1].Outcome != string(apiv1.OutcomeAllow) {
			t.Errorf("call %s: events %+v, want allow then result", id, evs)
		}
	}
}

func TestBatchWritesToOneTargetRunInRequestOrder(t *testing.T) {
	tt := &targetTool{}
	var mu sync.Mutex
	var log []string
	var running atomic.Int32
	otherStarted := make(chan struct{})
	tt.run = func(ctx context.Context, name string) error {
		if name == "other" {
			close(otherStarted)
			return nil
		}
		if running.Add(1) != 1 {
			t.Errorf("%s runs while another call on the same file runs", name)
		}
		defer running.Add(-1)
		if name == "w1" {
			// The call on another file is not held back by this one.
			<-otherStarted
		}
		mu.Lock()
		log = append(log, name)
		mu.Unlock()
		return nil
	}
	f := newFixture(t, map[string]string{"a.rego": allowAll, "b.rego": authzAllow}, tt)
	out := f.pl.Batch(context.Background(), BatchRequest{Identity: alice, Calls: []BatchCall{
		targetCall("w1", "same", "write"),
		targetCall("r2", "same", "read"),
		targetCall("w3", "same", "write"),
		targetCall("other", "elsewhere", "write"),
		targetCall("w5", "same", "write"),
	}}, true)
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	if got := fmt.Sprint(log); got != "[w1 r2 w3 w5]" {
		t.Fatalf("calls on the same file ran in order %s, want [w1 r2 w3 w5]", got)
	}
}

func TestConflictsOrderOnlyWhatShareATargetWithAWrite(t *testing.T) {
	tt := &targetTool{}
	f := newFixture(t, map[string]string{"a.rego": allowAll, "b.rego": authzAllow}, tt)
	var calls []*call
	for _, bc := range []BatchCall{targetCall("r0", "x", "read"), targetCall("r1", "x", "read"), targetCall("w2", "x", "write"), targetCall("r3", "y", "read"), targetCall("r4", "x", "read")} {
		c := &call{req: Request{Identity: alice, Tool: bc.Tool, Arguments: bc.Arguments}, run: true, callID: bc.CallID, durations: map[string]int64{}}
		rev, _ := f.pl.revision()
		c.rev = rev
		g, err := f.pl.admit(context.Background(), rev, alice, "", bc.Tool)
		if err != nil {
			t.Fatal(err)
		}
		if _, final, err := f.pl.prepareCall(context.Background(), c, g); err != nil || final {
			t.Fatalf("prepare %s: %v", bc.CallID, err)
		}
		calls = append(calls, c)
	}
	got := fmt.Sprint(conflicts(calls, make([]bool, len(calls))))
	if want := "[[] [] [0 1] [] [2]]"; got != want {
		t.Fatalf("dependencies %s, want %s", got, want)
	}
}

// brokenAvailability compiles but fails at evaluation (conflicting values
// of a complete rule): the gateway must fail closed.
const brokenAvailability = `package toolgate.availability

allow := true if input.tenant == "acme"

allow := false if input.tenant == "acme"
`

// authzBoom errors at evaluation for one call only.
const authzBoom = `package toolgate.authz

decision := {"allow": true, "reasons": ["test allows"]} if input.args.name != "boom"

decision := {"allow": true} if input.args.name == "boom"

decision := {"allow": false} if input.args.name == "boom"
`

func TestBatchPermanentFailureCancelsUnfinishedSiblings(t *testing.T) {
	t.Run("policy error while deciding: nothing runs", func(t *testing.T) {
		tt := &targetTool{}
		var ran atomic.Int32
		tt.run = func(context.Context, string) error { ran.Add(1); return nil }
		f := newFixture(t, map[string]string{"a.rego": allowAll, "b.rego": authzBoom}, tt)
		out := f.pl.Batch(context.Background(), BatchRequest{Identity: alice, Calls: []BatchCall{
			targetCall("a", "p", "read"),
			targetCall("boom", "q", "read"),
			targetCall("c", "r", "read"),
		}}, true)
		if !errors.Is(out.Err, ErrPolicy) || out.Failed != 1 {
			t.Fatalf("err %v at %d, want ErrPolicy at call 1", out.Err, out.Failed)
		}
		if ran.Load() != 0 {
			t.Fatal("a call ran although its batch failed before running anything")
		}
		for _, i := range []int{0, 2} {
			r := out.Results[i]
			if r.Outcome != apiv1.OutcomeCanceled || r.Content != TextCanceled || !r.IsError || r.Data["started"] != false {
				t.Errorf("sibling %d: %+v, want canceled, not started", i, r)
			}
			evs := f.events(t, r.CallID)
			if len(evs) == 0 || evs[0].Outcome != string(apiv1.OutcomeCanceled) || evs[0].Reasons[0] != ReasonCanceled {
				t.Errorf("sibling %d: events %+v, want a canceled event last", i, evs)
			}
		}
	})

	t.Run("availability error at a slot: the running call is canceled and says its effects stay", func(t *testing.T) {
		tt := &targetTool{}
		swapped := make(chan struct{})
		finishesRuns := make(chan struct{})
		var f *fixture
		tt.run = func(ctx context.Context, name string) error {
			switch name {
			case "runs":
				// Withdraw the policy's sanity while this call runs, once
				// "finishes" passed its own availability check.
				<-finishesRuns
				pdir := filepath.Join(filepath.Dir(f.ws), "policies")
				if err := os.WriteFile(filepath.Join(pdir, "a.rego"), []byte(brokenAvailability), 0o644); err != nil {
					return err
				}
				if err := f.eng.Load(context.Background()); err != nil {
					return err
				}
				close(swapped)
				<-ctx.Done()
				return ctx.Err()
			case "finishes":
				close(finishesRuns)
				<-swapped
			}
			return nil
		}
		f = newFixture(t, map[string]string{"a.rego": allowAll, "b.rego": authzAllow}, tt)
		out := f.pl.Batch(context.Background(), BatchRequest{Identity: alice, Calls: []BatchCall{
			targetCall("runs", "p", "write"),
			targetCall("finishes", "q", "write"),
			targetCall("waits", "q", "write"), // after "finishes": same file
		}}, true)
		if !errors.Is(out.Err, ErrPolicy) || out.Failed != 2 {
			t.Fatalf("err %v at %d, want the initiating ErrPolicy of call 2", out.Err, out.Failed)
		}
		if r := out.Results[0]; r.Outcome != apiv1.OutcomeCanceled || r.Data["started"] != true || r.Data["effects"] != EffectsNotUndone {
			t.Errorf("running sibling: %+v, want canceled, started, effects not undone", r)
		}
		if r := out.Results[1]; r.Outcome != "ok" {
			t.Errorf("finished sibling: %+v, want its own ok result", r)
		}
		evs := f.events(t, "runs")
		if len(evs) != 2 || evs[0].Phase != audit.PhaseResult || evs[0].Outcome != string(apiv1.OutcomeCanceled) {
			t.Errorf("running sibling's events %+v, want allow then a canceled result", evs)
		}
	})

	t.Run("no policy at all fails the batch as a single call would", func(t *testing.T) {
		f := newFixture(t, map[string]string{}, &targetTool{})
		out := f.pl.Batch(context.Background(), BatchRequest{Identity: alice, Calls: []BatchCall{targetCall("a", "p", "read")}}, true)
		if !errors.Is(out.Err, ErrPolicy) || out.Failed != -1 {
			t.Fatalf("err %v at %d, want ErrPolicy for the whole batch", out.Err, out.Failed)
		}
	})
}

func TestBatchRespectsTheTenantConcurrencyLimit(t *testing.T) {
	const limit, calls = 2, 6
	tt := &targetTool{}
	var running, most atomic.Int32
	release := make(chan struct{})
	tt.run = func(ctx context.Context, name string) error {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		<-release
		return nil
	}
	f := newFixture(t, map[string]string{"a.rego": allowAll, "b.rego": authzAllow}, tt)
	f.withConcurrency(limit)
	var batch []BatchCall
	for i := range calls {
		batch = append(batch, targetCall(fmt.Sprint("c", i), fmt.Sprint("f", i), "write"))
	}
	done := make(chan BatchResponse)
	go func() {
		done <- f.pl.Batch(context.Background(), BatchRequest{Identity: alice, Calls: batch}, true)
	}()
	// Every call is accounted for: limit of them run, the rest wait for a
	// slot. Only then is anything released.
	eventually(t, "limit calls run and the others wait for a slot", func() bool {
		return running.Load() == limit && f.pl.slots.Waiting() == calls-limit
	})
	if running.Load() != limit {
		t.Fatalf("%d calls run at once, limit %d", running.Load(), limit)
	}
	close(release)
	out := <-done
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	if most.Load() != limit {
		t.Fatalf("at most %d calls ran at once, want exactly the limit %d", most.Load(), limit)
	}
	for i, r := range out.Results {
		if r.Outcome != "ok" {
			t.Errorf("call %d: %+v", i, r)
		}
	}
}

func TestBatchDecisionsRunNothing(t *testing.T) {
	tt := &targetTool{}
	var ran atomic.Int32
	tt.run = func(context.Context, string) error { ran.Add(1); return nil }
	f := newFixture(t, map[string]string{"a.rego": allowAll, "b.rego": authzAllow}, tt)
	out := f.pl.Batch(context.Background(), BatchRequest{Identity: alice, Calls: []BatchCall{
		targetCall("a", "p", "write"), targetCall("b", "p", "write"),
	}}, false)
	if out.Err != nil || ran.Load() != 0 {
		t.Fatalf("err %v, ran %d", out.Err, ran.Load())
	}
	for _, r := range out.Results {
		if r.Outcome != apiv1.OutcomeAllow || r.RequestDigest == "" {
			t.Errorf("%+v, want allow with a digest", r)
		}
	}
}

// A tool that ran and declared a permanent failure (an upstream's
// tools.ErrPermanent) ends the batch like a policy failure does, except
// that its own result stands: it ran and was audited.
func TestBatchToolPermanentFailureCancelsSiblingsAndKeepsItsResult(t *testing.T) {
	tt := &targetTool{}
	runsStarted := make(chan struct{})
	tt.run = func(ctx context.Context, name string) error {
		switch name {
		case "runs":
			close(runsStarted)
			<-ctx.Done() // until the batch is canceled
			return ctx.Err()
		case "perm":
			<-runsStarted
			return fmt.Errorf("%w: the service was retired", tools.ErrPermanent)
		}
		return nil
	}
	f := newFixture(t, map[string]string{"a.rego": allowAll, "b.rego": authzAllow}, tt)
	out := f.pl.Batch(context.Background(), BatchRequest{Identity: alice, Calls: []BatchCall{
		targetCall("runs", "p", "write"),
		targetCall("perm", "x", "read"),
		targetCall("waits", "p", "write"), // after "runs": same file
	}}, true)
	if !errors.Is(out.Err, ErrToolPermanent) || out.Failed != 1 {
		t.Fatalf("err %v at %d, want ErrToolPermanent at call 1", out.Err, out.Failed)
	}
	if r := out.Results[1]; r.CallID != "perm" || r.Outcome != "tool_error" || !r.Permanent || r.DecisionID == "" {
		t.Errorf("initiating call: %+v, want its own permanent tool_error", r)
	}
	if evs := f.events(t, "perm"); len(evs) != 2 || evs[0].Phase != audit.PhaseResult || evs[0].Outcome != "tool_error" || evs[1].Outcome != string(apiv1.OutcomeAllow) {
		t.Errorf("initiating call's events %+v, want allow then its tool_error result", evs)
	}
	if r := out.Results[0]; r.Outcome != apiv1.OutcomeCanceled || r.Permanent || r.Data["started"] != true || r.Data["effects"] != EffectsNotUndone {
		t.Errorf("running sibling: %+v, want canceled, started, effects not undone", r)
	}
	if r := out.Results[2]; r.Outcome != apiv1.OutcomeCanceled || r.Data["started"] != false {
		t.Errorf("waiting sibling: %+v, want canceled, not started", r)
	}
	for _, id := range []string{"runs", "waits"} {
		if evs := f.events(t, id); len(evs) == 0 || evs[0].Outcome != string(apiv1.OutcomeCanceled) || evs[0].Reasons[0] != ReasonCanceled {
			t.Errorf("sibling %s: events %+v, want a canceled event last", id, evs)
		}
	}
}

// cmdTool stands for a command tool (action command.execute): a command
// resource, file resources it names (access "command") and files it is
// known to write (access "write").
type cmdTool struct {
	run func(ctx context.Context, name string) error
}

func (*cmdTool) Spec() *tools.Spec {
	return &tools.Spec{
		Name: "cmd", Description: "test command", Kind: tools.KindBuiltin, Action: "command.execute", Effects: []string{"command.execute"},
		InputSchema: `{"type":"object","additionalProperties":false,"required":["name"],
"properties":{"name":{"type":"string"},"args":{"type":"array","items":{"type":"string"}},"writes":{"type":"array","items":{"type":"string"}}}}`,
	}
}

func (*cmdTool) Prepare(_ context.Context, _ *tools.Env, args map[string]any) (tools.Plan, error) {
	res := []tools.Resource{{"type": "command", "command": args["name"]}}
	for _, access := range []string{"args", "writes"} {
		list, _ := args[access].([]any)
		for _, p := range list {
			a := "command"
			if access == "writes" {
				a = "write"
			}
			res = append(res, tools.Resource{"type": "file", "path": p, "access": a})
		}
	}
	return tools.Plan{Args: args, Resources: res, Artifact: targetArtifact{args["name"].(string)}}, nil
}

func (t *cmdTool) Run(ctx context.Context, _ *tools.Env, a any, _ tools.Limits) (tools.Result, error) {
	name := a.(targetArtifact).name
	if t.run != nil {
		if err := t.run(ctx, name); err != nil {
			return tools.Result{}, err
		}
	}
	return tools.Result{Content: "ran " + name}, nil
}

func cmdCall(name string, args, writes []string) BatchCall {
	m := map[string]any{"name": name}
	if args != nil {
		m["args"] = args
	}
	if writes != nil {
		m["writes"] = writes
	}
	b, _ := json.Marshal(m)
	return BatchCall{Tool: "cmd", CallID: name, Arguments: b}
}

func TestConflictsOrderCommandsOnlyAgainstFileWrites(t *testing.T) {
	f := newFixture(t, map[string]string{"a.rego": allowAll, "b.rego": authzAllow}, &targetTool{}, &cmdTool{})
	var calls []*call
	for _, bc := range []BatchCall{
		cmdCall("c0", []string{"1"}, nil),        // sleep 1
		cmdCall("c1", []string{"1"}, nil),        // sleep 1 again: no write, no order
		targetCall("w2", "x", "write"),           // a file write after two commands
		cmdCall("c3", []string{"x"}, nil),        // reads the workspace after that write
		targetCall("r4", "y", "read"),            // a read orders nothing against commands
		cmdCall("c5", nil, []string{"out"}),      // a known write: after every earlier command and write
		targetCall("r6", "out", "read"),          // reads what c5 writes
		cmdCall("c7", []string{"z"}, []string{}), // after c5, which writes a file
	} {
		c := &call{req: Request{Identity: alice, Tool: bc.Tool, Arguments: bc.Arguments}, run: true, callID: bc.CallID, durations: map[string]int64{}}
		rev, _ := f.pl.revision()
		c.rev = rev
		g, err := f.pl.admit(context.Background(), rev, alice, "", bc.Tool)
		if err != nil {
			t.Fatal(err)
		}
		if _, final, err := f.pl.prepareCall(context.Background(), c, g); err != nil || final {
			t.Fatalf("prepare %s: %v", bc.CallID, err)
		}
		calls = append(calls, c)
	}
	got := fmt.Sprint(conflicts(calls, make([]bool, len(calls))))
	if want := "[[] [] [0 1] [2] [] [0 1 2 3] [5] [2 5]]"; got != want {
		t.Fatalf("dependencies %s, want %s", got, want)
	}
}

func TestBatchRunsIndependentCommandsAtOnce(t *testing.T) {
	const calls = 4
	var running, most atomic.Int32
	all := make(chan struct{})
	var once sync.Once
	ct := &cmdTool{run: func(ctx context.Context, name string) error {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		if n == calls {
			once.Do(func() { close(all) })
		}
		// Every command waits until all of them run: commands run one
		// after another would each give up here.
		select {
		case <-all:
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("the other commands never started")
		}
	}}
	f := newFixture(t, map[string]string{"a.rego": allowAll, "b.rego": authzAllow}, ct)
	var batch []BatchCall
	for i := range calls {
		batch = append(batch, cmdCall(fmt.Sprint("c", i), []string{"1"}, nil))
	}
	out := f.pl.Batch(context.Background(), BatchRequest{Identity: alice, Calls: batch}, true)
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	for i, r := range out.Results {
		if r.Outcome != "ok" || r.Content != fmt.Sprint("ran c", i) {
			t.Errorf("result %d: %+v", i, r)
		}
	}
	if most.Load() != calls {
		t.Fatalf("at most %d commands ran at once, want all %d", most.Load(), calls)
	}
}
