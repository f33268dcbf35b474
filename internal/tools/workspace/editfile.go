package workspace

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/wspath"
)

// edit-file limits.
const (
	editMaxOutput    = 16 << 10
	editMaxFileBytes = 10 << 20
	editMaxResult    = 16 << 20
)

const editFileSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "path": {
      "type": "string", "minLength": 1, "maxLength": 4096,
      "description": "File to edit, relative to the workspace root, with '/' as separator."
    },
    "old_string": {
      "type": "string", "minLength": 1, "maxLength": 1048576,
      "description": "Exact text to replace. It must occur exactly once in the file unless replace_all is true; include enough surrounding context to make it unique."
    },
    "new_string": {
      "type": "string", "maxLength": 1048576,
      "description": "Text to put in place of old_string. Must differ from old_string."
    },
    "replace_all": {
      "type": "boolean", "default": false,
      "description": "Replace every occurrence of old_string instead of exactly one. Default false."
    }
  },
  "required": ["path", "old_string", "new_string"],
  "additionalProperties": false
}`

// EditFile is the edit-file tool: exact string replacement in a file.
type EditFile struct{ spec tools.Spec }

// NewEditFile returns the edit-file tool.
func NewEditFile() *EditFile {
	return &EditFile{spec: tools.Spec{
		Name: "edit-file",
		Description: "Replace exact text in a workspace file. old_string must occur exactly once " +
			"unless replace_all is set. Returns the number of replacements and a short unified-diff preview.",
		InputSchema: editFileSchema,
		Kind:        tools.KindBuiltin,
		Action:      "fs.write",
		Effects:     []string{"fs.write"},
		Annotations: tools.Annotations{Destructive: true},
		Limits:      tools.Limits{Timeout: 30 * time.Second, MaxOutputBytes: editMaxOutput},
	}}
}

// editArtifact is what edit-file runs.
type editArtifact struct {
	target     wspath.Resolved
	oldString  string
	newString  string
	replaceAll bool
}

// Spec returns the published description.
func (t *EditFile) Spec() *tools.Spec { return &t.spec }

// Prepare resolves the file, which must exist, and applies the defaults.
func (t *EditFile) Prepare(_ context.Context, env *tools.Env, args map[string]any) (tools.Plan, error) {
	root, err := workspaceRoot(env)
	if err != nil {
		return tools.Plan{}, err
	}
	p, err := requiredString(args, "path")
	if err != nil {
		return tools.Plan{}, err
	}
	oldS, err := requiredString(args, "old_string")
	if err != nil {
		return tools.Plan{}, err
	}
	if oldS == "" {
		return tools.Plan{}, &tools.ArgError{Pointer: "/old_string", Rule: "must not be empty"}
	}
	newS, err := requiredString(args, "new_string")
	if err != nil {
		return tools.Plan{}, err
	}
	if newS == oldS {
		return tools.Plan{}, &tools.ArgError{Pointer: "/new_string", Rule: "must differ from old_string"}
	}
	all, err := boolArg(args, "replace_all", false)
	if err != nil {
		return tools.Plan{}, err
	}
	r, err := resolvePath(root, p, wspath.MustExist)
	if err != nil {
		return tools.Plan{}, err
	}
	out := copyArgs(args)
	out["replace_all"] = all
	return tools.Plan{
		Args:      out,
		Resources: []tools.Resource{wspath.AddLinks(tools.Resource{"type": "file", "path": r.Rel, "access": "write"}, r.Info)},
		Artifact:  editArtifact{target: r, oldString: oldS, newString: newS, replaceAll: all},
	}, nil
}

// Run applies the replacement through the descriptor whose identity was
// checked, so the bytes read and the bytes written are the same file's.
func (t *EditFile) Run(ctx context.Context, env *tools.Env, artifact any, lim tools.Limits) (tools.Result, error) {
	a, ok := artifact.(editArtifact)
	if !ok {
		return tools.Result{}, fmt.Errorf("workspace: edit-file: artifact of type %T", artifact)
	}
	root, err := workspaceRoot(env)
	if err != nil {
		return tools.Result{}, err
	}
	f, err := openPrepared(root, a.target, lim, os.O_RDWR)
	if err != nil {
		return tools.Result{}, err
	}
	defer f.Close()

	raw, err := io.ReadAll(io.LimitReader(f, editMaxFileBytes+1))
	if err != nil {
		return tools.Result{}, fmt.Errorf("workspace: read: %w", err)
	}
	if len(raw) > editMaxFileBytes {
		return tools.Result{}, &tools.ModelError{Message: "file is too large to edit (over 10 MiB)"}
	}
	if strings.IndexByte(string(raw[:min(len(raw), binarySniffBytes)]), 0) >= 0 {
		return tools.Result{}, &tools.ModelError{Message: "file appears to be binary; edit-file edits text files only"}
	}
	before := string(raw)
	at := occurrences(before, a.oldString)
	switch {
	case len(at) == 0:
		return tools.Result{}, &tools.ModelError{Message: "old_string not found in file"}
	case len(at) > 1 && !a.replaceAll:
		return tools.Result{}, &tools.ModelError{Message: "old_string occurs " + strconv.Itoa(len(at)) +
			" times; provide more context or set replace_all"}
	}
	if size := len(before) + len(at)*(len(a.newString)-len(a.oldString)); size > editMaxResult {
		return tools.Result{}, &tools.ModelError{Message: "the edit would make the file larger than 16 MiB"}
	}
	after := replaceAt(before, at, len(a.oldString), a.newString)

	if err := ctx.Err(); err != nil {
		return tools.Result{}, err
	}
	if err := recheckLinks(f); err != nil {
		return tools.Result{}, err
	}
	if err := checkRoom(env, int64(len(after)-len(before))); err != nil {
		return tools.Result{}, err
	}
	defer remeasure(env)
	if _, err := f.WriteAt([]byte(after), 0); err != nil {
		return tools.Result{}, quotaErr(fmt.Errorf("workspace: write: %w", err))
	}
	if err := f.Truncate(int64(len(after))); err != nil {
		return tools.Result{}, quotaErr(fmt.Errorf("workspace: truncate: %w", err))
	}
	if err := f.Close(); err != nil {
		return tools.Result{}, quotaErr(fmt.Errorf("workspace: close: %w", err))
	}

	noun := "occurrence"
	if len(at) != 1 {
		noun = "occurrences"
	}
	content := "replaced " + strconv.Itoa(len(at)) + " " + noun + " in " + a.target.Rel + "\n" +
		diffPreview(a.target.Rel, before, after, at, len(a.oldString), len(a.newString))
	max := outputCap(lim, editMaxOutput)
	return tools.Result{
		Content:   capString(content, max),
		Data:      map[string]any{"replacements": len(at), "path": a.target.Rel},
		Bytes:     len(content),
		Truncated: len(content) > max,
	}, nil
}

// occurrences returns the byte offsets of the non-overlapping occurrences
// of sub in s, left to right, as strings.Replace would replace them.
func occurrences(s, sub string) []int {
	var at []int
	for i := 0; ; {
		j := strings.Index(s[i:], sub)
		if j < 0 {
			return at
		}
		at = append(at, i+j)
		i += j + len(sub)
	}
}

// replaceAt replaces the oldLen bytes at each offset with repl.
func replaceAt(s string, at []int, oldLen int, repl string) string {
	var b strings.Builder
	b.Grow(len(s) + len(at)*(len(repl)-oldLen))
	prev := 0
	for _, p := range at {
		b.WriteString(s[prev:p])
		b.WriteString(repl)
		prev = p + oldLen
	}
	b.WriteString(s[prev:])
	return b.String()
}
