package shell

import (
	"context"
	"errors"
	"os"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/internal/tools"
)

// inputWriteWait bounds how long process-input waits for a process that
// does not read its input; what fit by then is reported as written.
const inputWriteWait = 5 * time.Second

// ProcessInput is the process-input tool.
type ProcessInput struct {
	sh   *Shell
	spec tools.Spec
}

func newProcessInput(sh *Shell) *ProcessInput {
	return &ProcessInput{sh: sh, spec: tools.Spec{
		Name: "process-input",
		Description: "Write text to the standard input of a background process, optionally closing it " +
			"afterwards. Returns JSON {process_id, bytes_written, status}.",
		InputSchema: processSchema(`    "input": {
      "type": "string", "maxLength": ` + strconv.Itoa(sh.lim.MaxInputBytes) + `, "default": "",
      "description": "Text to write; include a trailing newline for line-oriented programs."
    },
    "close_stdin": {
      "type": "boolean", "default": false,
      "description": "Close the process's standard input after writing (end of file). Default false."
    }`),
		Kind:        tools.KindBuiltin,
		Action:      "process.write",
		Effects:     []string{"process.write"},
		Annotations: tools.Annotations{},
		Limits:      tools.Limits{Timeout: 10 * time.Second, MaxOutputBytes: 4 << 10},
	}}
}

// Spec returns the published description.
func (t *ProcessInput) Spec() *tools.Spec { return &t.spec }

// Prepare checks the input size in bytes and resolves the process.
func (t *ProcessInput) Prepare(_ context.Context, env *tools.Env, args map[string]any) (tools.Plan, error) {
	input, _, err := stringArg(args, "input")
	if err != nil {
		return tools.Plan{}, err
	}
	if len(input) > t.sh.lim.MaxInputBytes {
		return tools.Plan{}, &tools.ArgError{Pointer: "/input", Rule: CodeInputTooLarge + ": at most " + strconv.Itoa(t.sh.lim.MaxInputBytes) + " bytes"}
	}
	closeIn, err := boolArg(args, "close_stdin", false)
	if err != nil {
		return tools.Plan{}, err
	}
	p, res, err := prepareProcess(t.sh.sup, env, args)
	if err != nil {
		return tools.Plan{}, err
	}
	out := copyArgs(args)
	out["input"] = input
	out["close_stdin"] = closeIn
	return tools.Plan{
		Args:      out,
		Resources: []tools.Resource{res},
		Artifact:  &processArtifact{proc: p, input: input, closeIn: closeIn},
	}, nil
}

// Concealed is the answer for a process id that is not the session's.
func (t *ProcessInput) Concealed() *tools.ArgError { return concealed() }

// inputResult is the JSON shape of process-input.
type inputResult struct {
	ProcessID    string `json:"process_id"`
	BytesWritten int    `json:"bytes_written"`
	Status       string `json:"status"`
}

// Run writes the input.
func (t *ProcessInput) Run(ctx context.Context, _ *tools.Env, artifact any, _ tools.Limits) (tools.Result, error) {
	a, err := processArtifactOf(artifact)
	if err != nil {
		return tools.Result{}, err
	}
	p := a.proc
	if !p.running() {
		return tools.Result{}, errExited
	}
	n, err := p.write(ctx, a.input, a.closeIn)
	if err != nil {
		return tools.Result{}, err
	}
	return jsonResult(inputResult{ProcessID: p.id, BytesWritten: n, Status: p.snapshot().Status})
}

// write sends input to the process's stdin, waiting at most
// inputWriteWait (and never past ctx) for it to be read.
func (p *Process) write(ctx context.Context, input string, closeIn bool) (int, error) {
	p.inMu.Lock()
	defer p.inMu.Unlock()
	if p.stdin == nil {
		if p.stdinClosed {
			return 0, errStdinClosed
		}
		return 0, errExited
	}
	n := 0
	if input != "" {
		_ = p.stdin.SetWriteDeadline(time.Now().Add(untilDeadline(ctx, inputWriteWait)))
		var err error
		n, err = p.stdin.Write([]byte(input))
		_ = p.stdin.SetWriteDeadline(time.Time{})
		switch {
		case err == nil, errors.Is(err, os.ErrDeadlineExceeded):
		default: // the reading end is gone: the process is ending
			return n, errExited
		}
	}
	if closeIn {
		p.stdin.Close()
		p.stdin = nil
		p.stdinClosed = true
	}
	return n, nil
}
