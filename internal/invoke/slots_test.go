package invoke

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/decision"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/prepare"
	"github.com/toolgate/toolgate/internal/tools"
)

// eventually waits for cond; the bound guards against hanging, it is not a
// timing assertion.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// peak counts holders of something and remembers the most at once.
type peak struct{ now, most atomic.Int32 }

func (p *peak) enter() {
	n := p.now.Add(1)
	for {
		m := p.most.Load()
		if n <= m || p.most.CompareAndSwap(m, n) {
			return
		}
	}
}

func (p *peak) leave() { p.now.Add(-1) }

func TestTenantSlotsBoundEachTenantAlone(t *testing.T) {
	s := NewTenantSlots(2)
	ctx := context.Background()
	r1, err1 := s.Acquire(ctx, "acme")
	r2, err2 := s.Acquire(ctx, "acme")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}

	// A third holder of the same tenant waits...
	got := make(chan func(), 1)
	go func() {
		r, err := s.Acquire(ctx, "acme")
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	eventually(t, "the third acme caller to wait", func() bool { return s.Waiting() == 1 })

	// ...while another tenant gets its slots at once.
	for range 2 {
		short, cancel := context.WithTimeout(ctx, time.Second)
		r, err := s.Acquire(short, "globex")
		cancel()
		if err != nil {
			t.Fatalf("globex waited behind acme: %v", err)
		}
		defer r()
	}

	// A full tenant's caller whose context ends gets its error, no slot.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if r, err := s.Acquire(short, "globex"); !errors.Is(err, context.DeadlineExceeded) || r != nil {
		t.Fatalf("acquire past the deadline: %v", err)
	}

	// Releasing one acme slot lets the waiter in.
	r1()
	select {
	case r := <-got:
		r()
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter never got the released slot")
	}
	r2()
	if s.Waiting() != 0 {
		t.Fatalf("%d still waiting", s.Waiting())
	}
}

func TestTenantSlotsUnderContention(t *testing.T) {
	const size, per = 3, 40
	s := NewTenantSlots(size)
	tenants := []string{"acme", "globex", "initech"}
	peaks := map[string]*peak{}
	for _, tn := range tenants {
		peaks[tn] = &peak{}
	}
	var wg sync.WaitGroup
	for _, tn := range tenants {
		for range per {
			wg.Add(1)
			go func() {
				defer wg.Done()
				release, err := s.Acquire(context.Background(), tn)
				if err != nil {
					t.Error(err)
					return
				}
				peaks[tn].enter()
				time.Sleep(100 * time.Microsecond)
				peaks[tn].leave()
				release()
			}()
		}
	}
	wg.Wait()
	for _, tn := range tenants {
		if m := peaks[tn].most.Load(); m > size || m < 1 {
			t.Errorf("tenant %s: %d held at once, size %d", tn, m, size)
		}
	}
}

// gateTool blocks every run until its gate closes, counting the runs in
// flight; its action is chosen per tool.
type gateTool struct {
	spec    tools.Spec
	gate    chan struct{}
	running peak
	ran     atomic.Int32
}

func (g *gateTool) Spec() *tools.Spec { return &g.spec }

func (g *gateTool) Prepare(_ context.Context, _ *tools.Env, args map[string]any) (tools.Plan, error) {
	return tools.Plan{Args: args}, nil
}

func (g *gateTool) Run(ctx context.Context, _ *tools.Env, _ any, _ tools.Limits) (tools.Result, error) {
	g.ran.Add(1)
	g.running.enter()
	defer g.running.leave()
	select {
	case <-g.gate:
		return tools.Result{Content: "done"}, nil
	case <-ctx.Done():
		return tools.Result{}, ctx.Err()
	}
}

func newGateTool(name, action string) *gateTool {
	return &gateTool{gate: make(chan struct{}), spec: tools.Spec{Name: name, Kind: tools.KindBuiltin, Action: action,
		InputSchema: `{"type":"object"}`}}
}

func preparedFor(t *testing.T, tool tools.Tool, tenant string) *prepare.Prepared {
	t.Helper()
	reg, err := tools.NewRegistry(tool)
	if err != nil {
		t.Fatal(err)
	}
	p, err := prepare.New(reg, prepare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pr, err := p.Prepare(context.Background(), prepare.Call{
		Identity: &identity.Identity{Tenant: tenant, Principal: "a"}, Tool: tool,
		Env: &tools.Env{Tenant: tenant}, RawArgs: []byte(`{}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	return pr
}

func TestCommandCallsAreCappedPerTenant(t *testing.T) {
	const limit, calls = 2, 6
	iv := New(Options{TenantCommands: limit, MaxConcurrent: 64})
	cmd := newGateTool("cmd", ActionCommand)
	other := newGateTool("lookup", "fs.read")

	var wg sync.WaitGroup
	outs := make(chan Outcome, calls)
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs <- iv.Invoke(context.Background(), preparedFor(t, cmd, "acme"), decision.Obligations{})
		}()
	}
	eventually(t, "cap acme commands to run and the rest to wait", func() bool {
		return cmd.running.now.Load() == limit && iv.CommandsWaiting() == calls-limit
	})

	// Another tenant's command runs at once, beside the saturated tenant.
	cmd2 := newGateTool("cmd", ActionCommand)
	close(cmd2.gate)
	out := iv.Invoke(context.Background(), preparedFor(t, cmd2, "globex"), decision.Obligations{TimeoutMS: 5000})
	if out.Outcome != apiv1.OutcomeOK {
		t.Fatalf("globex command: %+v", out)
	}

	// A non-command tool of the saturated tenant is not held back either.
	close(other.gate)
	if out := iv.Invoke(context.Background(), preparedFor(t, other, "acme"), decision.Obligations{TimeoutMS: 5000}); out.Outcome != apiv1.OutcomeOK {
		t.Fatalf("acme read: %+v", out)
	}

	// An acme command that gets no slot within its time limit fails
	// closed, without running.
	late := newGateTool("cmd", ActionCommand)
	out = iv.Invoke(context.Background(), preparedFor(t, late, "acme"), decision.Obligations{TimeoutMS: 30})
	if out.Outcome != apiv1.OutcomeToolError || out.Content != ToolFailed || !errors.Is(out.Err, context.DeadlineExceeded) {
		t.Fatalf("slot timeout: %+v", out)
	}
	if late.ran.Load() != 0 {
		t.Fatal("a call that never got a slot ran")
	}

	close(cmd.gate)
	wg.Wait()
	close(outs)
	for o := range outs {
		if o.Outcome != apiv1.OutcomeOK {
			t.Errorf("queued command: %+v", o)
		}
	}
	if m := cmd.running.most.Load(); m != limit {
		t.Fatalf("%d acme commands ran at once, cap %d", m, limit)
	}
}

func TestCommandSlotsSitUnderTheGlobalCap(t *testing.T) {
	// Two tenants with room for 3 commands each share a global cap of 4.
	iv := New(Options{TenantCommands: 3, MaxConcurrent: 4})
	cmd := newGateTool("cmd", ActionCommand)
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tenant := []string{"acme", "globex"}[i%2]
			if out := iv.Invoke(context.Background(), preparedFor(t, cmd, tenant), decision.Obligations{}); out.Outcome != apiv1.OutcomeOK {
				t.Errorf("%s: %+v", tenant, out)
			}
		}()
	}
	// Every call either runs or waits for a global slot; none is released
	// before the gate opens, so none can start later.
	eventually(t, "every call to run or wait", func() bool { return cmd.running.now.Load()+int32(iv.Waiting()) == 6 })
	if n := cmd.running.now.Load(); n != 4 {
		t.Fatalf("%d running, global cap 4", n)
	}
	close(cmd.gate)
	wg.Wait()
	if m := cmd.running.most.Load(); m != 4 {
		t.Fatalf("%d ran at once, global cap 4", m)
	}
}
