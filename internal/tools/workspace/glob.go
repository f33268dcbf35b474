package workspace

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gobwas/glob"

	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/wspath"
)

// glob limits.
const (
	globMaxMatches = 1000
	globMaxOutput  = 64 << 10
)

const globSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "pattern": {
      "type": "string", "minLength": 1, "maxLength": 1024,
      "description": "Glob matched against file paths relative to the searched directory, with '/' as separator: '*' and '?' do not cross '/', '**' does ('**/' also matches no directory at all), '[...]' is a character class and '{a,b}' alternatives. Example: '**/*.go'."
    },
    "path": {
      "type": "string", "minLength": 1, "maxLength": 4096, "default": ".",
      "description": "Directory to search, relative to the workspace root. Default '.', the workspace root."
    }
  },
  "required": ["pattern"],
  "additionalProperties": false
}`

// Glob is the glob tool: find files by name pattern.
type Glob struct{ spec tools.Spec }

// NewGlob returns the glob tool.
func NewGlob() *Glob {
	return &Glob{spec: tools.Spec{
		Name: "glob",
		Description: "Find files in the workspace whose path matches a glob pattern. Returns matching " +
			"paths relative to the workspace root, sorted, one per line. Directories are not listed; " +
			"symbolic links are listed but never followed.",
		InputSchema: globSchema,
		Kind:        tools.KindBuiltin,
		Action:      "fs.list",
		Effects:     []string{"fs.list"},
		Annotations: tools.Annotations{ReadOnly: true, Idempotent: true},
		Limits:      tools.Limits{Timeout: 30 * time.Second, MaxOutputBytes: globMaxOutput},
	}}
}

// globArtifact is what glob runs.
type globArtifact struct {
	dir     wspath.Resolved
	pattern *glob.Pattern
}

// Spec returns the published description.
func (t *Glob) Spec() *tools.Spec { return &t.spec }

// Prepare compiles the pattern and resolves the directory.
func (t *Glob) Prepare(_ context.Context, env *tools.Env, args map[string]any) (tools.Plan, error) {
	root, err := workspaceRoot(env)
	if err != nil {
		return tools.Plan{}, err
	}
	pattern, err := requiredString(args, "pattern")
	if err != nil {
		return tools.Plan{}, err
	}
	g, err := compileGlob(pattern)
	if err != nil {
		return tools.Plan{}, &tools.ArgError{Pointer: "/pattern", Rule: "must be a valid glob pattern"}
	}
	dir, err := resolveSearchRoot(root, args)
	if err != nil {
		return tools.Plan{}, err
	}
	if !dir.Info.IsDir() {
		return tools.Plan{}, &tools.ArgError{Pointer: "/path", Rule: "must be a directory"}
	}
	out := copyArgs(args)
	out["path"] = pathArgOrDefault(args)
	return tools.Plan{
		Args:      out,
		Resources: []tools.Resource{{"type": "file", "path": dir.Rel, "access": "list", "recursive": true}},
		Artifact:  globArtifact{dir: dir, pattern: g},
	}, nil
}

// Run walks the prepared directory, if it is still the same directory.
func (t *Glob) Run(ctx context.Context, env *tools.Env, artifact any, lim tools.Limits) (tools.Result, error) {
	a, ok := artifact.(globArtifact)
	if !ok {
		return tools.Result{}, fmt.Errorf("workspace: glob: artifact of type %T", artifact)
	}
	root, err := workspaceRoot(env)
	if err != nil {
		return tools.Result{}, err
	}
	excl, err := newExcluder(lim.ExcludePaths)
	if err != nil {
		return tools.Result{}, err
	}
	if excl.covers(a.dir.Rel) {
		return tools.Result{}, &tools.ModelError{Message: "path is excluded by policy"}
	}
	dir, err := openPreparedDir(root, a.dir)
	if err != nil {
		return tools.Result{}, err
	}
	defer dir.Close()

	max := outputCap(lim, globMaxOutput)
	budget := bodyBudget(max)
	var b strings.Builder
	matches, truncated := 0, false
	w := &walker{ctx: ctx, excl: excl}
	err = w.walk(dir, a.dir.Rel, func(e walkEntry) error {
		if !a.pattern.Match(e.rel) {
			return nil
		}
		if matches == globMaxMatches || b.Len()+len(e.ws)+1 > budget {
			truncated = true
			return errStopWalk
		}
		b.WriteString(e.ws)
		b.WriteByte('\n')
		matches++
		return nil
	})
	if err != nil {
		return tools.Result{}, err
	}
	if matches == 0 && !truncated {
		b.WriteString("[no matches]\n")
	}
	if truncated {
		b.WriteString("[truncated: showing the first " + strconv.Itoa(matches) + " matches; narrow the pattern or path]\n")
	}
	if w.incomplete {
		b.WriteString(incompleteNotice(w))
	}
	content := strings.TrimSuffix(b.String(), "\n")
	return tools.Result{
		Content:   capString(content, max),
		Data:      map[string]any{"matches": matches, "truncated": truncated || w.incomplete},
		Bytes:     len(content),
		Truncated: truncated || w.incomplete,
	}, nil
}

// compileGlob compiles a model-given glob with shell globstar semantics
// ("**/x" also matches "x"), which is what models expect of file globs.
func compileGlob(pattern string) (*glob.Pattern, error) {
	c := glob.Compiler{Separators: []rune{'/'}, Globstar: true}
	return c.Compile(pattern)
}

// pathArgOrDefault returns the path argument, "." when absent.
func pathArgOrDefault(args map[string]any) string {
	if p, ok := args["path"].(string); ok {
		return p
	}
	return "."
}

// resolveSearchRoot resolves the optional path argument of glob and grep,
// which must exist.
func resolveSearchRoot(root *os.Root, args map[string]any) (wspath.Resolved, error) {
	p, present, err := stringArg(args, "path")
	if err != nil {
		return wspath.Resolved{}, err
	}
	if !present {
		p = "."
	}
	r, err := resolvePath(root, p, wspath.MustExist)
	if err != nil {
		if ae, ok := err.(*tools.ArgError); ok && ae.Rule == wspath.RuleFileNotExist {
			return wspath.Resolved{}, &tools.ArgError{Pointer: "/path", Rule: "does not exist"}
		}
		return wspath.Resolved{}, err
	}
	return r, nil
}

// openPreparedDir opens a prepared directory as a root of its own and
// checks on the handle that it is still the prepared directory.
func openPreparedDir(root *os.Root, r wspath.Resolved) (*os.Root, error) {
	dir, err := root.OpenRoot(r.Rel)
	if err != nil {
		return nil, openErr(root, r, err)
	}
	st, err := dir.Stat(".")
	if err != nil || !wspath.SameIdentity(r.Info, st) {
		dir.Close()
		return nil, errChanged("directory is not the prepared one")
	}
	return dir, nil
}

// incompleteNotice says that a bound stopped the walk.
func incompleteNotice(w *walker) string {
	return "[search incomplete: stopped after " + strconv.Itoa(w.visited) +
		" entries or " + strconv.Itoa(cmp.Or(w.maxDepth, walkMaxDepth)) + " directory levels; narrow the path]\n"
}
