package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/pipeline"
	"github.com/toolgate/toolgate/internal/tools"
)

// timed is a tool that only has a time limit (keyLease reads nothing else).
type timed struct{ spec tools.Spec }

func (t *timed) Spec() *tools.Spec { return &t.spec }
func (t *timed) Prepare(context.Context, *tools.Env, map[string]any) (tools.Plan, error) {
	return tools.Plan{}, nil
}
func (t *timed) Run(context.Context, *tools.Env, any, tools.Limits) (tools.Result, error) {
	return tools.Result{}, nil
}

func TestKeyLeaseOutlastsTheLongestCall(t *testing.T) {
	t.Parallel()
	reg, err := tools.NewRegistry(&timed{tools.Spec{Name: "quick", Limits: tools.Limits{Timeout: time.Second}}})
	must(t, err)
	if got := keyLease(reg, 30*time.Second); got != pipeline.DefaultKeyLease {
		t.Fatalf("lease with short tools = %v, want the default %v", got, pipeline.DefaultKeyLease)
	}
	must(t, reg.Add(&timed{tools.Spec{Name: "slow", Limits: tools.Limits{Timeout: 10 * time.Minute}}}))
	if got := keyLease(reg, 30*time.Second); got != 50*time.Minute {
		t.Fatalf("lease with a 10m tool = %v, want 50m", got)
	}
	if got := keyLease(reg, time.Hour); got != 5*time.Hour {
		t.Fatalf("lease with a 1h default timeout = %v, want 5h", got)
	}
}
