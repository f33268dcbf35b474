package shell

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/command"
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

// bashArtifact is what bash runs: the command exactly as decided (the
// jail's interpreter parses it again and checks it prints to digest and
// yields segments), where, and with which programs.
type bashArtifact struct {
	command    string
	digest     string
	segments   [][]string
	cwd        string      // workspace-relative, symlink-free
	cwdInfo    fs.FileInfo // identity checked at run time
	timeout    time.Duration
	background bool
	pins       command.Pins // the segments' programs, resolved here (host paths)
	redirects  []string     // the names a redirection may open, as the command sees them
}

// Prepare parses the command into the command resource and the file
// resources of its arguments and redirections.
func (t *Bash) Prepare(_ context.Context, env *tools.Env, args map[string]any) (tools.Plan, error) {
	if env == nil || env.Workspace == nil || env.Workspace.Root() == nil {
		return tools.Plan{}, errNoWorkspace
	}
	text, err := requiredString(args, "command")
	if err != nil {
		return tools.Plan{}, err
	}
	if text == "" || utf8.RuneCountInString(text) > maxCommandRunes {
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
	file, err := command.Parse(text)
	if err != nil {
		return tools.Plan{}, &tools.ArgError{Pointer: "/command", Rule: "does not parse as a shell command"}
	}
	if len(file.Stmts) == 0 {
		return tools.Plan{}, &tools.ArgError{Pointer: "/command", Rule: "contains no command"}
	}
	root := env.Workspace.Root()
	rel, info, err := resolveDir(root, "/cwd", cwd)
	if err != nil {
		return tools.Plan{}, err
	}
	digest, err := command.Digest(file)
	if err != nil {
		return tools.Plan{}, &tools.ArgError{Pointer: "/command", Rule: "does not parse as a shell command"}
	}
	a := command.Analyze(file, text)
	mountAt := t.sh.mountAt(env.Workspace.Dir())
	sc := scan{root: root, mountAt: mountAt, bases: commandBases(root, rel, a.Segments)}
	files, err := sc.argumentFiles(a.Segments)
	if err != nil {
		return tools.Plan{}, err
	}
	rds, err := command.Redirects(file, text, mountAt)
	if errors.Is(err, command.ErrDynamicRedirect) {
		return tools.Plan{}, &tools.ArgError{Pointer: "/command", Rule: ruleDynamicRedirect}
	}
	if err != nil {
		return tools.Plan{}, err
	}
	redirectFiles, err := sc.redirectFiles(rds)
	if err != nil {
		return tools.Plan{}, err
	}
	files, err = mergeFiles(files, redirectFiles)
	if err != nil {
		return tools.Plan{}, err
	}
	// The working folder is a file resource of its own (access "list": the
	// command can list it), so a protected cwd meets the path rules.
	resources := make([]tools.Resource, 0, len(files)+2)
	resources = append(resources, tools.Resource{
		"type":       "command",
		"command":    text,
		"segments":   segmentsValue(a.Segments),
		"plain":      a.Plain,
		"constructs": stringsValue(a.Constructs),
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
			command:    text,
			digest:     digest,
			segments:   a.Segments,
			cwd:        rel,
			cwdInfo:    info,
			timeout:    time.Duration(timeoutMS) * time.Millisecond,
			background: background,
			pins:       command.PinPrograms(a.Segments, filepath.Join(env.Workspace.Dir(), filepath.FromSlash(rel)), t.sh.env.path),
			redirects:  redirectNames(rds, path.Join(mountAt, rel), a.Segments),
		},
	}, nil
}

// Run executes the prepared command in its jail.
func (t *Bash) Run(ctx context.Context, env *tools.Env, artifact any, lim tools.Limits) (tools.Result, error) {
	a, ok := artifact.(*bashArtifact)
	if !ok {
		return tools.Result{}, errBadArtifact
	}
	if env == nil || env.Workspace == nil || env.Workspace.Root() == nil {
		return tools.Result{}, errNoWorkspace
	}
	if t.sh.opts.Withheld != "" || t.sh.opts.Runner == nil {
		return tools.Result{}, errWithheld
	}
	root, wsDir := env.Workspace.Root(), env.Workspace.Dir()
	rel, info, err := resolveDir(root, "", a.cwd)
	if err != nil || rel != a.cwd || !wspath.SameIdentity(info, a.cwdInfo) {
		return tools.Result{}, fmt.Errorf("shell: working folder: %w", tools.ErrTargetChanged)
	}
	j, err := t.sh.newJob(a, env.Tenant, wsDir, lim)
	if err != nil {
		return tools.Result{}, err
	}
	readOnly := quotaConfine(env, j)
	if a.background {
		id, err := t.sh.sup.start(env.Tenant, env.SessionID, env.Principal, a, j)
		if err != nil {
			return tools.Result{}, err
		}
		return quotaStarted(env, j, readOnly, tools.Result{
			Content: "started process " + id,
			Data:    map[string]any{"process_id": id},
		}), nil
	}
	res, err := t.runForeground(ctx, a, j, lim)
	return quotaAfter(ctx, env, readOnly, res, err)
}

// runForeground runs the job to its end or its time limit and shapes the
// result.
func (t *Bash) runForeground(ctx context.Context, a *bashArtifact, j *job, lim tools.Limits) (tools.Result, error) {
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
	if err := j.start(nil, capture); err != nil {
		return tools.Result{}, err
	}
	ended := j.wait(runCtx)
	timedOut := false
	switch {
	case ended == nil:
	case errors.Is(ctx.Err(), context.Canceled):
		return tools.Result{}, fmt.Errorf("shell: %w", ctx.Err())
	case errors.Is(ended, context.DeadlineExceeded):
		timedOut = true
	default: // Close canceled it: the gateway is shutting down
		return tools.Result{}, errClosed
	}
	ex, rep, err := j.result()
	if err != nil {
		return tools.Result{}, err
	}
	code := ex.Code
	if timedOut {
		code = timedOutStatus
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
	if ex.OOM {
		newline()
		b.WriteString(memoryNotice)
	}
	if timedOut {
		newline()
		b.WriteString("[timed out after " + formatSeconds(timeout) + "; every process of the command killed]\n")
	}
	newline()
	b.WriteString("[exit code: " + strconv.Itoa(code) + "]")

	return tools.Result{
		Content: b.String(),
		Data: map[string]any{
			"exit_code":     float64(code),
			"truncated":     truncated,
			"timed_out":     timedOut,
			"refused":       stringsValue(rep.Refused),
			"refused_files": float64(rep.RefusedOpens),
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
