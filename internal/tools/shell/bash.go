package shell

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"mvdan.cc/sh/v3/syntax"

	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/wspath"
)

// maxCommandRunes is the longest command bash accepts.
const maxCommandRunes = 16384

// timedOutStatus is the exit code reported for a command that ran out of
// time, as timeout(1) does.
const timedOutStatus = 124

// Bash is the bash tool.
type Bash struct {
	sh   *Shell
	spec tools.Spec
}

func newBash(sh *Shell) *Bash {
	maxMS := sh.lim.MaxTimeout.Milliseconds()
	defMS := sh.lim.DefaultTimeout.Milliseconds()
	schema := fmt.Sprintf(`{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "command": {
      "type": "string", "minLength": 1, "maxLength": %d,
      "description": "The shell command (Bash syntax) to run in the workspace. Plain commands (literal words joined by &&, ||, ; and |) are the easiest to get approved."
    },
    "timeout_ms": {
      "type": "integer", "minimum": 1, "maximum": %d, "default": %d,
      "description": "Milliseconds before the command and everything it started are killed. Default %d."
    },
    "background": {
      "type": "boolean", "default": false,
      "description": "Start the command as a background process and return its process_id at once; read it with process-output. Needs a session."
    },
    "cwd": {
      "type": "string", "minLength": 1, "maxLength": 4096, "default": ".",
      "description": "Working folder, relative to the workspace root. Default the root."
    }
  },
  "required": ["command"],
  "additionalProperties": false
}`, maxCommandRunes, maxMS, defMS, defMS)
	return &Bash{sh: sh, spec: tools.Spec{
		Name: "bash",
		Description: "Run a shell command in the workspace and return its combined stdout and stderr " +
			"followed by [exit code: N]. A non-zero exit is a normal result. Long output keeps its " +
			"beginning and end. Only the programs that were approved run; anything else is refused " +
			"with exit status 126. The environment is minimal (PATH, HOME, LANG, TERM=dumb).",
		InputSchema: schema,
		Kind:        tools.KindBuiltin,
		Action:      "command.execute",
		Effects:     []string{"command.execute"},
		Annotations: tools.Annotations{Destructive: true, OpenWorld: true},
		// The call's own ceiling leaves room past the longest command to
		// kill its process group and report.
		Limits: tools.Limits{Timeout: sh.lim.MaxTimeout + 5*time.Second, MaxOutputBytes: sh.lim.MaxOutputBytes},
	}}
}

// Spec returns the published description.
func (t *Bash) Spec() *tools.Spec { return &t.spec }

// bashArtifact is what bash runs: the parsed program itself, never its text
// parsed again.
type bashArtifact struct {
	file       *syntax.File
	command    string
	segments   [][]string
	words      [][]*syntax.Word
	cwd        string      // workspace-relative, symlink-free
	cwdInfo    fs.FileInfo // identity checked at run time
	timeout    time.Duration
	background bool
	pinned     map[string]pinnedProgram // the segments' programs, resolved here
}

// Prepare parses the command into the command resource.
func (t *Bash) Prepare(_ context.Context, env *tools.Env, args map[string]any) (tools.Plan, error) {
	if env == nil || env.Workspace == nil || env.Workspace.Root() == nil {
		return tools.Plan{}, errNoWorkspace
	}
	command, err := requiredString(args, "command")
	if err != nil {
		return tools.Plan{}, err
	}
	if command == "" || utf8.RuneCountInString(command) > maxCommandRunes {
		return tools.Plan{}, &tools.ArgError{Pointer: "/command", Rule: "must be 1 to " + strconv.Itoa(maxCommandRunes) + " characters"}
	}
	maxMS := int(t.sh.lim.MaxTimeout.Milliseconds())
	timeoutMS, err := intArg(args, "timeout_ms", int(t.sh.lim.DefaultTimeout.Milliseconds()), 1, maxMS)
	if err != nil {
		return tools.Plan{}, err
	}
	background, err := boolArg(args, "background", false)
	if err != nil {
		return tools.Plan{}, err
	}
	cwd, ok, err := stringArg(args, "cwd")
	if err != nil {
		return tools.Plan{}, err
	}
	if !ok {
		cwd = "."
	}
	if background && env.SessionID == "" {
		return tools.Plan{}, errNoSession
	}
	file, err := parseCommand(command)
	if err != nil {
		return tools.Plan{}, &tools.ArgError{Pointer: "/command", Rule: "does not parse as a shell command"}
	}
	if len(file.Stmts) == 0 {
		return tools.Plan{}, &tools.ArgError{Pointer: "/command", Rule: "contains no command"}
	}
	rel, info, err := resolveDir(env.Workspace.Root(), "/cwd", cwd)
	if err != nil {
		return tools.Plan{}, err
	}
	a := analyze(file, command)
	files, err := argumentFiles(env.Workspace.Root(), rel, a.segments)
	if err != nil {
		return tools.Plan{}, err
	}
	// The working folder is a file resource of its own (access "list": the
	// command can list it), so a protected cwd meets the path rules.
	resources := make([]tools.Resource, 0, len(files)+2)
	resources = append(resources, tools.Resource{
		"type":       "command",
		"command":    command,
		"segments":   segmentsValue(a.segments),
		"plain":      a.plain,
		"constructs": stringsValue(a.constructs),
		"cwd":        rel,
		"background": background,
	})
	resources = append(resources, files...)
	resources = append(resources, tools.Resource{"type": "file", "path": rel, "access": accessList})

	out := copyArgs(args)
	out["timeout_ms"] = float64(timeoutMS)
	out["background"] = background
	out["cwd"] = cwd
	return tools.Plan{
		Args:      out,
		Resources: resources,
		Artifact: &bashArtifact{
			file:       file,
			command:    command,
			segments:   a.segments,
			words:      a.words,
			cwd:        rel,
			cwdInfo:    info,
			timeout:    time.Duration(timeoutMS) * time.Millisecond,
			background: background,
			pinned:     pinPrograms(a.segments, filepath.Join(env.Workspace.Dir(), filepath.FromSlash(rel)), t.sh.env.path),
		},
	}, nil
}

// Run executes the prepared program.
func (t *Bash) Run(ctx context.Context, env *tools.Env, artifact any, lim tools.Limits) (tools.Result, error) {
	a, ok := artifact.(*bashArtifact)
	if !ok {
		return tools.Result{}, errBadArtifact
	}
	if env == nil || env.Workspace == nil || env.Workspace.Root() == nil {
		return tools.Result{}, errNoWorkspace
	}
	if t.sh.opts.Withheld != "" {
		return tools.Result{}, errWithheld
	}
	root, wsDir := env.Workspace.Root(), env.Workspace.Dir()
	rel, info, err := resolveDir(root, "", a.cwd)
	if err != nil || rel != a.cwd || !wspath.SameIdentity(info, a.cwdInfo) {
		return tools.Result{}, fmt.Errorf("shell: working folder: %w", tools.ErrTargetChanged)
	}
	e := &execution{
		file:     a.file,
		approved: buildApproved(a.words, wsDir),
		root:     root,
		wsDir:    wsDir,
		dir:      filepath.Join(wsDir, filepath.FromSlash(rel)),
		env:      t.sh.env.build(wsDir),
		path:     t.sh.env.path,
		confine:  t.sh.opts.Confine,
		conf:     Confinement{Workspace: wsDir, Programs: programPaths(a.pinned), Limits: lim},
		pinned:   a.pinned,
		groups:   map[int]struct{}{},
	}
	if a.background {
		id, err := t.sh.sup.start(env.Tenant, env.SessionID, a, e)
		if err != nil {
			return tools.Result{}, err
		}
		return tools.Result{
			Content: "started process " + id,
			Data:    map[string]any{"process_id": id},
		}, nil
	}
	return t.runForeground(ctx, a, e, lim)
}

// runForeground runs e to its end or its time limit and shapes the result.
func (t *Bash) runForeground(ctx context.Context, a *bashArtifact, e *execution, lim tools.Limits) (tools.Result, error) {
	timeout := effectiveTimeout(ctx, a.timeout, lim)
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	release, err := t.sh.sup.track(cancel)
	if err != nil {
		return tools.Result{}, err
	}
	defer release()

	max := lim.MaxOutputBytes
	if max <= 0 || max > t.sh.lim.MaxOutputBytes {
		max = t.sh.lim.MaxOutputBytes
	}
	capture := newHeadTail(max - noticeReserve)
	e.out = capture
	e.killCtx = runCtx

	code, runErr := e.run(runCtx)
	ended := runCtx.Err() // before cancel: why the run stopped, if it was stopped
	cancel()
	e.finish()
	timedOut := false
	switch {
	case runErr == nil:
	case ended == nil:
		return tools.Result{}, runErr
	case errors.Is(ctx.Err(), context.Canceled):
		return tools.Result{}, fmt.Errorf("shell: %w", ctx.Err())
	case errors.Is(ended, context.DeadlineExceeded):
		timedOut, code = true, timedOutStatus
	default: // Close canceled it: the gateway is shutting down
		return tools.Result{}, errClosed
	}

	text, truncated, total := capture.finish()
	var b strings.Builder
	b.Grow(len(text) + 96)
	b.WriteString(text)
	newline := func() {
		if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
			b.WriteByte('\n')
		}
	}
	if timedOut {
		newline()
		b.WriteString("[timed out after " + formatSeconds(timeout) + "; process group killed]\n")
	}
	newline()
	b.WriteString("[exit code: " + strconv.Itoa(code) + "]")

	refused, refusedOpens := e.refusals()
	return tools.Result{
		Content: b.String(),
		Data: map[string]any{
			"exit_code":     float64(code),
			"truncated":     truncated,
			"timed_out":     timedOut,
			"refused":       stringsValue(refused),
			"refused_files": float64(refusedOpens),
		},
		Bytes:     int(total),
		Truncated: truncated,
	}, nil
}

// formatSeconds renders d as seconds, e.g. "30s" or "1.5s".
func formatSeconds(d time.Duration) string {
	return strconv.FormatFloat(d.Round(time.Millisecond).Seconds(), 'f', -1, 64) + "s"
}

// segmentsValue converts segments to resource JSON values.
func segmentsValue(segs [][]string) []any {
	out := make([]any, len(segs))
	for i, s := range segs {
		out[i] = stringsValue(s)
	}
	return out
}

func stringsValue(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
