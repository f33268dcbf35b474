package shell

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/internal/tools"
)

// processArtifact is what the process tools run: the process resolved at
// prepare for the caller's (tenant, session).
type processArtifact struct {
	proc *Process
	// Tool-specific arguments.
	cursor   int64
	maxBytes int
	wait     time.Duration
	input    string
	closeIn  bool
	grace    time.Duration
}

// processSchema builds the JSON Schema of a process tool from the extra
// properties it takes besides process_id.
func processSchema(extra string) string {
	if extra != "" {
		extra = ",\n" + extra
	}
	return `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "process_id": {
      "type": "string", "minLength": 1, "maxLength": 64,
      "description": "The id bash returned when it started the process in the background."
    }` + extra + `
  },
  "required": ["process_id"],
  "additionalProperties": false
}`
}

// prepareProcess resolves process_id for the caller's session and builds
// the process resource, which names the principal that started the
// process (owner) for policy to judge. A missing id and one of another
// session or tenant give the same ArgError, so nothing about foreign
// processes reaches policy or the caller; a process of another principal
// of the session reaches policy, which may deny it as if it were missing
// ("conceal", see Concealed). The callers check their other arguments
// before calling it: an error that only an existing process could give
// would tell it apart from a missing one before policy decides.
func prepareProcess(sup *Supervisor, env *tools.Env, args map[string]any) (*Process, tools.Resource, error) {
	if env == nil || env.SessionID == "" {
		return nil, nil, errNoSession
	}
	id, err := requiredString(args, "process_id")
	if err != nil {
		return nil, nil, err
	}
	p, ok := sup.lookup(env.Tenant, env.SessionID, id)
	if !ok {
		return nil, nil, errNotFound
	}
	return p, tools.Resource{
		"type":     "process",
		"id":       p.id,
		"owner":    p.owner,
		"command":  p.command,
		"segments": segmentsValue(p.segments),
	}, nil
}

// concealed is the process tools' tools.Concealer answer: the one for a
// process id that is not the session's.
func concealed() *tools.ArgError { return errNotFound }

// processArtifactOf checks the artifact type.
func processArtifactOf(artifact any) (*processArtifact, error) {
	a, ok := artifact.(*processArtifact)
	if !ok || a.proc == nil {
		return nil, errBadArtifact
	}
	return a, nil
}

// jsonResult renders v as the content and data of a result. Data gets the
// same fields as JSON values (numbers as float64).
func jsonResult(v any) (tools.Result, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // output text keeps its < > &
	if err := enc.Encode(v); err != nil {
		return tools.Result{}, fmt.Errorf("shell: encode result: %w", err)
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	var data map[string]any
	if err := json.Unmarshal(b, &data); err != nil {
		return tools.Result{}, fmt.Errorf("shell: decode result: %w", err)
	}
	return tools.Result{Content: string(b), Data: data, Bytes: len(b)}, nil
}

// untilDeadline is d, shortened so that the call ends before ctx does.
func untilDeadline(ctx context.Context, d time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left-reserve(left) < d {
			d = left - reserve(left)
		}
	}
	return max(d, 0)
}
