package invoke

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/decision"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/prepare"
	"github.com/toolgate/toolgate/internal/tools"
)

// stubTool's behaviour is chosen by the prepared argument "mode", so each
// test prepares exactly the call it wants to run.
type stubTool struct{ spec tools.Spec }

func (s *stubTool) Spec() *tools.Spec { return &s.spec }

func (s *stubTool) Prepare(_ context.Context, _ *tools.Env, args map[string]any) (tools.Plan, error) {
	return tools.Plan{Args: args, Artifact: args["mode"].(string)}, nil
}

var gotLimits tools.Limits

func (s *stubTool) Run(ctx context.Context, _ *tools.Env, a any, lim tools.Limits) (tools.Result, error) {
	gotLimits = lim
	switch a.(string) {
	case "ok":
		return tools.Result{Content: "fine", Bytes: 4}, nil
	case "big":
		return tools.Result{Content: strings.Repeat("é", 1000), Bytes: 2000}, nil
	case "slow":
		<-ctx.Done()
		return tools.Result{}, ctx.Err()
	case "ignores-deadline":
		<-ctx.Done() // and answers success after it anyway
		return tools.Result{Content: "late"}, nil
	case "panic":
		panic("secret /srv/path")
	case "model":
		return tools.Result{}, &tools.ModelError{Message: "old_string not found in file"}
	case "permanent":
		return tools.Result{}, fmt.Errorf("upstream said 409, detail %q: %w", "decommissioned", tools.ErrPermanent)
	}
	return tools.Result{}, errors.New("open /srv/acme/x: permission denied")
}

func prepared(t *testing.T, mode string, lim tools.Limits) *prepare.Prepared {
	t.Helper()
	tool := &stubTool{spec: tools.Spec{Name: "stub", Kind: tools.KindBuiltin, Action: "test", Limits: lim,
		InputSchema: `{"type":"object","properties":{"mode":{"type":"string"}},"required":["mode"]}`}}
	reg, _ := tools.NewRegistry(tool)
	p, err := prepare.New(reg, prepare.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pr, err := p.Prepare(context.Background(), prepare.Call{
		Identity: &identity.Identity{Tenant: "acme", Principal: "a"}, Tool: tool,
		Env: &tools.Env{Tenant: "acme"}, RawArgs: []byte(`{"mode":"` + mode + `"}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	return pr
}

func TestObligationsOnlyTightenLimits(t *testing.T) {
	iv := New(Options{DefaultTimeout: 30 * time.Second, MaxOutputBytes: 1000})
	spec := &tools.Spec{Limits: tools.Limits{Timeout: 10 * time.Second, MaxOutputBytes: 500, ExcludePaths: []string{"a/**"}}}
	cases := []struct {
		name    string
		ob      decision.Obligations
		timeout time.Duration
		max     int
	}{
		{"none", decision.Obligations{}, 10 * time.Second, 500},
		{"tighter", decision.Obligations{TimeoutMS: 2000, MaxOutputBytes: 100}, 2 * time.Second, 100},
		{"looser is ignored", decision.Obligations{TimeoutMS: 60000, MaxOutputBytes: 1 << 20}, 10 * time.Second, 500},
		{"negative is ignored", decision.Obligations{TimeoutMS: -1, MaxOutputBytes: -5}, 10 * time.Second, 500},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lim := iv.Limits(spec, tc.ob)
			if lim.Timeout != tc.timeout || lim.MaxOutputBytes != tc.max {
				t.Fatalf("limits %v/%d, want %v/%d", lim.Timeout, lim.MaxOutputBytes, tc.timeout, tc.max)
			}
		})
	}
	lim := iv.Limits(spec, decision.Obligations{ExcludePaths: []string{"secrets/**"}})
	if strings.Join(lim.ExcludePaths, ",") != "a/**,secrets/**" {
		t.Fatalf("exclusions only add up: %v", lim.ExcludePaths)
	}
	if strings.Join(spec.Limits.ExcludePaths, ",") != "a/**" {
		t.Fatal("computing limits modified the tool's spec")
	}
	if d := iv.Limits(&tools.Spec{}, decision.Obligations{}); d.Timeout != 30*time.Second || d.MaxOutputBytes != 1000 {
		t.Fatalf("gateway defaults not applied: %+v", d)
	}
}

func TestOutcomesAreShapedAndRedacted(t *testing.T) {
	iv := New(Options{})
	cases := []struct {
		mode    string
		outcome apiv1.Outcome
		content string
	}{
		{"ok", apiv1.OutcomeOK, "fine"},
		{"fail", apiv1.OutcomeToolError, ToolFailed},
		{"panic", apiv1.OutcomeToolError, ToolFailed},
		{"model", apiv1.OutcomeToolError, "old_string not found in file"},
		{"permanent", apiv1.OutcomeToolError, ToolFailed},
	}
	for _, tc := range cases {
		t.Run(tc.mode, func(t *testing.T) {
			out := iv.Invoke(context.Background(), prepared(t, tc.mode, tools.Limits{}), decision.Obligations{})
			if out.Outcome != tc.outcome || out.Content != tc.content || out.IsError != (tc.outcome != apiv1.OutcomeOK) {
				t.Fatalf("got %+v", out)
			}
			if tc.outcome == apiv1.OutcomeToolError && out.Err == nil {
				t.Fatal("the internal cause is lost")
			}
			if out.Permanent != (tc.mode == "permanent") {
				t.Fatalf("Permanent = %v: only a tools.ErrPermanent failure is permanent", out.Permanent)
			}
		})
	}
}

func TestTimeoutFromObligation(t *testing.T) {
	iv := New(Options{})
	out := iv.Invoke(context.Background(), prepared(t, "slow", tools.Limits{}), decision.Obligations{TimeoutMS: 20})
	if out.Outcome != apiv1.OutcomeToolError || out.Content != ToolFailed || !errors.Is(out.Err, context.DeadlineExceeded) {
		t.Fatalf("got %+v", out)
	}
	if gotLimits.Timeout != 20*time.Millisecond {
		t.Fatalf("tool saw timeout %v", gotLimits.Timeout)
	}
	out = iv.Invoke(context.Background(), prepared(t, "ignores-deadline", tools.Limits{}), decision.Obligations{TimeoutMS: 1})
	if out.Outcome != apiv1.OutcomeToolError {
		t.Fatalf("a result delivered after the deadline counted as success: %+v", out)
	}
}

func TestOutputIsCappedOnARuneBoundary(t *testing.T) {
	iv := New(Options{})
	out := iv.Invoke(context.Background(), prepared(t, "big", tools.Limits{}), decision.Obligations{MaxOutputBytes: 101})
	if len(out.Content) > 101 || !out.Truncated || !utf8.ValidString(out.Content) || !strings.HasSuffix(out.Content, truncationNotice) {
		t.Fatalf("content %d bytes, truncated=%v: %q", len(out.Content), out.Truncated, out.Content)
	}
}

func BenchmarkInvokeOverhead(b *testing.B) {
	iv := New(Options{})
	t := &testing.T{}
	p := prepared(t, "ok", tools.Limits{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		iv.Invoke(ctx, p, decision.Obligations{})
	}
}
