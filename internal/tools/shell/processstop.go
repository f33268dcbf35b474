package shell

import (
	"context"
	"time"

	"github.com/toolgate/toolgate/internal/tools"
)

// process-stop limits.
const stopMaxGraceMS = 10000

// ProcessStop is the process-stop tool.
type ProcessStop struct {
	sh   *Shell
	spec tools.Spec
}

func newProcessStop(sh *Shell) *ProcessStop {
	def := sh.lim.GracePeriod.Milliseconds()
	if def > stopMaxGraceMS {
		def = stopMaxGraceMS
	}
	return &ProcessStop{sh: sh, spec: tools.Spec{
		Name: "process-stop",
		Description: "Stop a background process and everything it started: SIGTERM, then SIGKILL after " +
			"grace_ms. Returns JSON {process_id, status, exit_code}. Stopping an ended process just reports it.",
		InputSchema: processSchema(`    "grace_ms": {
      "type": "integer", "minimum": 0, "maximum": 10000, "default": ` + itoa64(def) + `,
      "description": "Milliseconds between SIGTERM and SIGKILL. Default ` + itoa64(def) + `."
    }`),
		Kind:        tools.KindBuiltin,
		Action:      "process.stop",
		Effects:     []string{"process.stop"},
		Annotations: tools.Annotations{Destructive: true, Idempotent: true},
		Limits:      tools.Limits{Timeout: 20 * time.Second, MaxOutputBytes: 4 << 10},
	}}
}

// Spec returns the published description.
func (t *ProcessStop) Spec() *tools.Spec { return &t.spec }

// Prepare applies the default grace and resolves the process.
func (t *ProcessStop) Prepare(_ context.Context, env *tools.Env, args map[string]any) (tools.Plan, error) {
	def := int(min(t.sh.lim.GracePeriod.Milliseconds(), stopMaxGraceMS))
	grace, err := intArg(args, "grace_ms", def, 0, stopMaxGraceMS)
	if err != nil {
		return tools.Plan{}, err
	}
	p, res, err := prepareProcess(t.sh.sup, env, args)
	if err != nil {
		return tools.Plan{}, err
	}
	out := copyArgs(args)
	out["grace_ms"] = float64(grace)
	return tools.Plan{
		Args:      out,
		Resources: []tools.Resource{res},
		Artifact:  &processArtifact{proc: p, grace: time.Duration(grace) * time.Millisecond},
	}, nil
}

// Concealed is the answer for a process id that is not the session's.
func (t *ProcessStop) Concealed() *tools.ArgError { return concealed() }

// stopResult is the JSON shape of process-stop.
type stopResult struct {
	ProcessID string `json:"process_id"`
	Status    string `json:"status"`
	ExitCode  *int   `json:"exit_code"`
}

// Run stops the process and reports its final state.
func (t *ProcessStop) Run(ctx context.Context, _ *tools.Env, artifact any, _ tools.Limits) (tools.Result, error) {
	a, err := processArtifactOf(artifact)
	if err != nil {
		return tools.Result{}, err
	}
	a.proc.stop(ctx, untilDeadline(ctx, a.grace))
	s := a.proc.snapshot()
	return jsonResult(stopResult{ProcessID: s.ID, Status: s.Status, ExitCode: s.ExitCode})
}
