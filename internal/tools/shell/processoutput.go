package shell

import (
	"context"
	"time"

	"github.com/toolgate/toolgate/internal/tools"
)

// process-output limits.
const (
	outputDefaultBytes = 16 << 10
	outputMaxBytes     = 64 << 10
	outputMaxWaitMS    = 30000
)

// ProcessOutput is the process-output tool.
type ProcessOutput struct {
	sh   *Shell
	spec tools.Spec
}

func newProcessOutput(sh *Shell) *ProcessOutput {
	return &ProcessOutput{sh: sh, spec: tools.Spec{
		Name: "process-output",
		Description: "Read the output of a background process from a byte cursor. Returns JSON " +
			"{process_id, status (running|exited|killed), exit_code, output, next_cursor, dropped_bytes}; " +
			"pass next_cursor back to continue. wait_ms waits for new output or the exit.",
		InputSchema: processSchema(`    "cursor": {
      "type": "integer", "minimum": 0, "maximum": 9007199254740991, "default": 0,
      "description": "Byte offset in the process's output to read from. Default 0."
    },
    "max_bytes": {
      "type": "integer", "minimum": 1, "maximum": 65536, "default": 16384,
      "description": "Most bytes of output to return. Default 16384."
    },
    "wait_ms": {
      "type": "integer", "minimum": 0, "maximum": 30000, "default": 0,
      "description": "Milliseconds to wait for new output or the process's exit when there is none yet. Default 0."
    }`),
		Kind:        tools.KindBuiltin,
		Action:      "process.read",
		Effects:     []string{"process.read"},
		Annotations: tools.Annotations{ReadOnly: true},
		// Room for the longest wait and a fully escaped chunk.
		Limits: tools.Limits{Timeout: 35 * time.Second, MaxOutputBytes: 128 << 10},
	}}
}

// Spec returns the published description.
func (t *ProcessOutput) Spec() *tools.Spec { return &t.spec }

// Prepare applies the defaults and resolves the process.
func (t *ProcessOutput) Prepare(_ context.Context, env *tools.Env, args map[string]any) (tools.Plan, error) {
	cursor, err := intArg(args, "cursor", 0, 0, 1<<53-1)
	if err != nil {
		return tools.Plan{}, err
	}
	maxBytes, err := intArg(args, "max_bytes", outputDefaultBytes, 1, outputMaxBytes)
	if err != nil {
		return tools.Plan{}, err
	}
	waitMS, err := intArg(args, "wait_ms", 0, 0, outputMaxWaitMS)
	if err != nil {
		return tools.Plan{}, err
	}
	p, res, err := prepareProcess(t.sh.sup, env, args)
	if err != nil {
		return tools.Plan{}, err
	}
	out := copyArgs(args)
	out["cursor"] = float64(cursor)
	out["max_bytes"] = float64(maxBytes)
	out["wait_ms"] = float64(waitMS)
	return tools.Plan{
		Args:      out,
		Resources: []tools.Resource{res},
		Artifact: &processArtifact{
			proc: p, cursor: int64(cursor), maxBytes: maxBytes,
			wait: time.Duration(waitMS) * time.Millisecond,
		},
	}, nil
}

// Concealed is the answer for a process id that is not the session's.
func (t *ProcessOutput) Concealed() *tools.ArgError { return concealed() }

// outputResult is the JSON shape of process-output.
type outputResult struct {
	ProcessID    string `json:"process_id"`
	Status       string `json:"status"`
	ExitCode     *int   `json:"exit_code"`
	Output       string `json:"output"`
	NextCursor   int64  `json:"next_cursor"`
	DroppedBytes int64  `json:"dropped_bytes"`
}

// Run reads output, waiting for some when asked to.
func (t *ProcessOutput) Run(ctx context.Context, _ *tools.Env, artifact any, lim tools.Limits) (tools.Result, error) {
	a, err := processArtifactOf(artifact)
	if err != nil {
		return tools.Result{}, err
	}
	p := a.proc
	wait := untilDeadline(ctx, a.wait)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	maxBytes := a.maxBytes
	for {
		// Status first: when it says ended, all output is in the ring.
		snap := p.snapshot()
		c, changed, _ := p.out.read(a.cursor, maxBytes)
		waiting := len(c.data) == 0 && c.dropped == 0 && snap.Status == StateRunning && wait > 0
		if waiting {
			select {
			case <-changed:
				continue
			case <-p.done:
				continue
			case <-timer.C:
				wait = 0
				continue
			case <-ctx.Done():
				wait = 0
				continue
			}
		}
		res, err := jsonResult(outputResult{
			ProcessID: p.id, Status: snap.Status, ExitCode: snap.ExitCode,
			Output: string(c.data), NextCursor: c.next, DroppedBytes: c.dropped,
		})
		if err != nil {
			return tools.Result{}, err
		}
		// Escaping can grow the text: read less until it fits the cap.
		if lim.MaxOutputBytes > 0 && len(res.Content) > lim.MaxOutputBytes && maxBytes > 1 {
			maxBytes /= 2
			continue
		}
		return res, nil
	}
}
