package workspace

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gobwas/glob"

	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/wspath"
)

// grep limits.
const (
	grepMaxMatches   = 1000
	grepMaxOutput    = 64 << 10
	grepMaxFileBytes = 10 << 20
	grepMaxLineRunes = 500
)

const grepSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "pattern": {
      "type": "string", "minLength": 1, "maxLength": 1024,
      "description": "Regular expression (RE2 syntax) searched for in each line."
    },
    "path": {
      "type": "string", "minLength": 1, "maxLength": 4096, "default": ".",
      "description": "File or directory to search, relative to the workspace root. Default '.', the whole workspace."
    },
    "glob": {
      "type": "string", "minLength": 1, "maxLength": 1024,
      "description": "Only search files matching this glob. Without '/', it is matched against the file name ('*.go'); with '/', against the path relative to the searched directory ('src/**/*.ts')."
    },
    "ignore_case": {
      "type": "boolean", "default": false,
      "description": "Match case-insensitively. Default false."
    }
  },
  "required": ["pattern"],
  "additionalProperties": false
}`

// Grep is the grep tool: search file contents with a regular expression.
type Grep struct{ spec tools.Spec }

// NewGrep returns the grep tool.
func NewGrep() *Grep {
	return &Grep{spec: tools.Spec{
		Name: "grep",
		Description: "Search the contents of workspace files with a regular expression (RE2). Returns " +
			"matching lines as path:line:text, sorted by path then line. Binary files, files over " +
			"10 MiB and symbolic links are skipped.",
		InputSchema: grepSchema,
		Kind:        tools.KindBuiltin,
		Action:      "fs.read",
		Effects:     []string{"fs.read"},
		Annotations: tools.Annotations{ReadOnly: true, Idempotent: true},
		Limits:      tools.Limits{Timeout: 30 * time.Second, MaxOutputBytes: grepMaxOutput},
	}}
}

// grepArtifact is what grep runs.
type grepArtifact struct {
	root   wspath.Resolved
	re     *regexp.Regexp
	pre    *regexp.Regexp // multi-line prefilter over whole files; nil when unsafe
	filter *glob.Pattern  // nil when no glob was given
	byPath bool           // filter matches the relative path, not the name
}

// Spec returns the published description.
func (t *Grep) Spec() *tools.Spec { return &t.spec }

// Prepare compiles the expression and the filter and resolves the root.
func (t *Grep) Prepare(_ context.Context, env *tools.Env, args map[string]any) (tools.Plan, error) {
	root, err := workspaceRoot(env)
	if err != nil {
		return tools.Plan{}, err
	}
	pattern, err := requiredString(args, "pattern")
	if err != nil {
		return tools.Plan{}, err
	}
	fold, err := boolArg(args, "ignore_case", false)
	if err != nil {
		return tools.Plan{}, err
	}
	a := grepArtifact{}
	flags := ""
	if fold {
		flags = "(?i)"
	}
	if a.re, err = regexp.Compile(flags + pattern); err != nil {
		return tools.Plan{}, &tools.ArgError{Pointer: "/pattern", Rule: "must be a valid RE2 regular expression"}
	}
	a.pre = prefilter(pattern, fold)
	g, present, err := stringArg(args, "glob")
	if err != nil {
		return tools.Plan{}, err
	}
	if present {
		if a.filter, err = compileGlob(g); err != nil {
			return tools.Plan{}, &tools.ArgError{Pointer: "/glob", Rule: "must be a valid glob pattern"}
		}
		a.byPath = hasSlash(g)
	}
	if a.root, err = resolveSearchRoot(root, args); err != nil {
		return tools.Plan{}, err
	}
	isDir := a.root.Info.IsDir()
	if !isDir && !a.root.Info.Mode().IsRegular() {
		return tools.Plan{}, &tools.ArgError{Pointer: "/path", Rule: "must be a regular file or a directory"}
	}
	out := copyArgs(args)
	out["path"] = pathArgOrDefault(args)
	out["ignore_case"] = fold
	return tools.Plan{
		Args:      out,
		Resources: []tools.Resource{wspath.AddLinks(tools.Resource{"type": "file", "path": a.root.Rel, "access": "read", "recursive": isDir}, a.root.Info)},
		Artifact:  a,
	}, nil
}

// prefilter returns the expression compiled in multi-line mode, which
// matches a whole file whenever the line-wise expression matches one of its
// lines; grep uses it to jump to candidate lines. It is nil when that does
// not hold: with text anchors (\A, \z, or (?-m)^ and $) a line's match need
// not be a match in the whole file.
func prefilter(pattern string, fold bool) *regexp.Regexp {
	flags := "(?m)"
	if fold {
		flags = "(?mi)"
	}
	expr := flags + pattern
	tree, err := syntax.Parse(expr, syntax.Perl)
	if err != nil || hasTextAnchor(tree) {
		return nil
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil
	}
	return re
}

func hasTextAnchor(re *syntax.Regexp) bool {
	if re.Op == syntax.OpBeginText || re.Op == syntax.OpEndText {
		return true
	}
	for _, sub := range re.Sub {
		if hasTextAnchor(sub) {
			return true
		}
	}
	return false
}

// grepRun is the state of one search.
type grepRun struct {
	a         *grepArtifact
	out       strings.Builder
	budget    int
	buf       []byte
	matches   int
	files     int
	skipped   int // binary, too large, or changed since listing
	truncated bool
}

// Run searches the prepared file or directory.
func (t *Grep) Run(ctx context.Context, env *tools.Env, artifact any, lim tools.Limits) (tools.Result, error) {
	a, ok := artifact.(grepArtifact)
	if !ok {
		return tools.Result{}, fmt.Errorf("workspace: grep: artifact of type %T", artifact)
	}
	root, err := workspaceRoot(env)
	if err != nil {
		return tools.Result{}, err
	}
	excl, err := newExcluder(lim.ExcludePaths)
	if err != nil {
		return tools.Result{}, err
	}
	if excl.covers(a.root.Rel) {
		return tools.Result{}, &tools.ModelError{Message: "path is excluded by policy"}
	}
	max := outputCap(lim, grepMaxOutput)
	g := &grepRun{a: &a, budget: bodyBudget(max)}
	incomplete := ""

	if a.root.Info.IsDir() {
		dir, err := openPreparedDir(root, a.root)
		if err != nil {
			return tools.Result{}, err
		}
		defer dir.Close()
		w := &walker{ctx: ctx, excl: excl}
		err = w.walk(dir, a.root.Rel, func(e walkEntry) error {
			if !e.info.Mode().IsRegular() || !g.wants(e.rel, e.name) {
				return nil // symlinks and special files are never read
			}
			if e.info.Size() > grepMaxFileBytes {
				g.skipped++
				return nil
			}
			f, err := e.dir.OpenFile(e.name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
			if err != nil {
				g.skipped++
				return nil
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil || !wspath.SameIdentity(e.info, st) {
				g.skipped++ // swapped since listing: do not read it
				return nil
			}
			return g.file(f, e.ws, st.Size())
		})
		if err != nil {
			return tools.Result{}, err
		}
		if w.incomplete {
			incomplete = incompleteNotice(w)
		}
	} else {
		// A single file: a path filter sees its workspace path.
		if g.wants(a.root.Rel, path.Base(a.root.Rel)) {
			f, err := openPrepared(root, a.root, lim, os.O_RDONLY)
			if err != nil {
				return tools.Result{}, err
			}
			defer f.Close()
			size := a.root.Info.Size()
			if size > grepMaxFileBytes {
				g.skipped++
			} else if err := g.file(f, a.root.Rel, size); err != nil && err != errStopWalk {
				return tools.Result{}, err
			}
		}
	}

	b := &g.out
	if g.matches == 0 && !g.truncated {
		b.WriteString("[no matches]\n")
	}
	if g.truncated {
		b.WriteString("[truncated: showing the first " + strconv.Itoa(g.matches) +
			" matches; narrow the pattern, path or glob]\n")
	}
	b.WriteString(incomplete)
	content := strings.TrimSuffix(b.String(), "\n")
	trunc := g.truncated || incomplete != ""
	return tools.Result{
		Content: capString(content, max),
		Data: map[string]any{
			"matches": g.matches, "files": g.files, "skipped": g.skipped, "truncated": trunc,
		},
		Bytes:     len(content),
		Truncated: trunc,
	}, nil
}

// wants applies the glob filter to a file.
func (g *grepRun) wants(rel, name string) bool {
	if g.a.filter == nil {
		return true
	}
	if g.a.byPath {
		return g.a.filter.Match(rel)
	}
	return g.a.filter.Match(name)
}

// file searches one opened file, shown as ws. It returns errStopWalk once
// the output is full.
func (g *grepRun) file(f *os.File, ws string, size int64) error {
	buf, ok, err := readSmall(f, slices.Grow(g.buf[:0], int(min(size, grepMaxFileBytes))+1))
	g.buf = buf
	if err != nil {
		g.skipped++
		return nil
	}
	if !ok || bytes.IndexByte(buf[:min(len(buf), binarySniffBytes)], 0) >= 0 {
		g.skipped++
		return nil
	}
	before := g.matches
	stop := g.scan(buf, ws)
	if g.matches > before {
		g.files++
	}
	if stop {
		return errStopWalk
	}
	return nil
}

// scan appends the matching lines of buf and reports whether to stop.
func (g *grepRun) scan(buf []byte, ws string) bool {
	pos, lineNo := 0, 1
	for pos < len(buf) {
		ls := pos
		if g.a.pre != nil {
			loc := g.a.pre.FindIndex(buf[pos:])
			if loc == nil {
				return false
			}
			s := pos + loc[0]
			if s == len(buf) && buf[len(buf)-1] == '\n' {
				return false // past the last line
			}
			ls = pos + bytes.LastIndexByte(buf[pos:s], '\n') + 1
			lineNo += bytes.Count(buf[pos:ls], []byte{'\n'})
		}
		end := len(buf)
		if i := bytes.IndexByte(buf[ls:], '\n'); i >= 0 {
			end = ls + i
		}
		if line := buf[ls:end]; g.a.re.Match(line) {
			if g.add(ws, lineNo, line) {
				return true
			}
		}
		pos, lineNo = end+1, lineNo+1
	}
	return false
}

// add appends one match and reports whether the output is full.
func (g *grepRun) add(ws string, lineNo int, line []byte) bool {
	text, cut := cutRunes(line, grepMaxLineRunes)
	size := len(ws) + 1 + 10 + 1 + len(text) + len(lineCutMarker) + 1
	if g.matches == grepMaxMatches || g.out.Len()+size > g.budget {
		g.truncated = true
		return true
	}
	g.out.WriteString(ws)
	g.out.WriteByte(':')
	g.out.WriteString(strconv.Itoa(lineNo))
	g.out.WriteByte(':')
	g.out.Write(text)
	if cut {
		g.out.WriteString(lineCutMarker)
	}
	g.out.WriteByte('\n')
	g.matches++
	return false
}

// readSmall reads all of f into buf, giving up (ok false) past
// grepMaxFileBytes.
func readSmall(f *os.File, buf []byte) ([]byte, bool, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > grepMaxFileBytes {
			return buf, false, nil
		}
		if err == io.EOF {
			return buf, true, nil
		}
		if err != nil {
			return buf, false, err
		}
	}
}
