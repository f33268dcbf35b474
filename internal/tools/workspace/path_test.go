package workspace

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/wspath"
)

// pathFixture builds a workspace with symlinks of every kind, and a
// directory outside it.
func pathFixture(t *testing.T) (*tools.Env, string, string) {
	t.Helper()
	env, dir := testEnv(t)
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"secret": "outside secret\n"})
	writeFiles(t, dir, map[string]string{
		"docs/guide.md": "guide\n",
		"src/main.go":   "package main\n",
	})
	rel, err := filepath.Rel(dir, outside)
	if err != nil {
		t.Fatal(err)
	}
	symlink(t, "docs", filepath.Join(dir, "docs-link"))
	symlink(t, "docs/guide.md", filepath.Join(dir, "file-link"))
	symlink(t, "file-link", filepath.Join(dir, "chain"))
	symlink(t, "..", filepath.Join(dir, "src/up"))
	symlink(t, "../docs/guide.md", filepath.Join(dir, "src/guide-link"))
	symlink(t, rel, filepath.Join(dir, "out-dir"))
	symlink(t, filepath.Join(rel, "secret"), filepath.Join(dir, "out-file"))
	symlink(t, filepath.Join(dir, "docs/guide.md"), filepath.Join(dir, "abs-link"))
	symlink(t, "loop-b", filepath.Join(dir, "loop-a"))
	symlink(t, "loop-a", filepath.Join(dir, "loop-b"))
	symlink(t, "docs/fresh.md", filepath.Join(dir, "dangling"))
	symlink(t, "../outside-new", filepath.Join(dir, "dangling-out"))
	return env, dir, outside
}

func TestPathsThatLeaveTheWorkspaceAreArgErrors(t *testing.T) {
	env, dir, _ := pathFixture(t)
	paths := []struct{ name, path string }{
		{"parent", "../x"},
		{"absolute", "/etc/passwd"},
		{"climb past a directory", "docs/../../x"},
		{"climb past a missing directory", "a/../../x"},
		{"NUL byte", "docs/guide.md\x00.txt"},
		{"symlink to an outside directory", "out-dir/secret"},
		{"symlink to an outside file", "out-file"},
		{"absolute symlink", "abs-link"},
		{"symlink loop", "loop-a"},
		{"climb through an in-workspace symlink", "src/up/.."},
	}
	write := NewWriteFile()
	for _, tool := range Tools() {
		for _, p := range paths {
			t.Run(tool.Spec().Name+"/"+p.name, func(t *testing.T) {
				args := argsFor(tool, p.path)
				_, err := tool.Prepare(t.Context(), env, args)
				ae := wantArgError(t, err, "/path")
				if strings.Contains(ae.Rule, dir) || strings.Contains(ae.Error(), "passwd") {
					t.Errorf("rule echoes the path: %q", ae.Rule)
				}
			})
		}
	}
	for _, p := range []string{"dangling-out", "out-dir/new.txt"} {
		_, err := write.Prepare(t.Context(), env, map[string]any{"path": p, "content": "x"})
		wantArgError(t, err, "/path")
	}
}

// argsFor builds minimal valid arguments naming path for any tool.
func argsFor(tool tools.Tool, path string) map[string]any {
	switch tool.Spec().Name {
	case "write-file":
		return map[string]any{"path": path, "content": "x"}
	case "edit-file":
		return map[string]any{"path": path, "old_string": "a", "new_string": "b"}
	case "glob", "grep":
		return map[string]any{"pattern": "x", "path": path}
	}
	return map[string]any{"path": path}
}

func TestResourcesNameTheResolvedTarget(t *testing.T) {
	env, _, _ := pathFixture(t)
	cases := []struct {
		name string
		tool tools.Tool
		args map[string]any
		want []tools.Resource
	}{
		{"read plain", NewReadFile(), map[string]any{"path": "docs/guide.md"},
			[]tools.Resource{{"type": "file", "path": "docs/guide.md", "access": "read"}}},
		{"read uncleaned", NewReadFile(), map[string]any{"path": "./docs//guide.md/"},
			[]tools.Resource{{"type": "file", "path": "docs/guide.md", "access": "read"}}},
		{"read through directory symlink", NewReadFile(), map[string]any{"path": "docs-link/guide.md"},
			[]tools.Resource{{"type": "file", "path": "docs/guide.md", "access": "read"}}},
		{"read file symlink chain", NewReadFile(), map[string]any{"path": "chain"},
			[]tools.Resource{{"type": "file", "path": "docs/guide.md", "access": "read"}}},
		{"read relative symlink with ..", NewReadFile(), map[string]any{"path": "src/guide-link"},
			[]tools.Resource{{"type": "file", "path": "docs/guide.md", "access": "read"}}},
		{"read through symlink to parent", NewReadFile(), map[string]any{"path": "src/up/src/main.go"},
			[]tools.Resource{{"type": "file", "path": "src/main.go", "access": "read"}}},
		{"read dotdot", NewReadFile(), map[string]any{"path": "src/../docs/guide.md"},
			[]tools.Resource{{"type": "file", "path": "docs/guide.md", "access": "read"}}},
		{"write existing via symlink", NewWriteFile(), map[string]any{"path": "file-link", "content": "x"},
			[]tools.Resource{{"type": "file", "path": "docs/guide.md", "access": "write"}}},
		{"write new below missing dirs", NewWriteFile(), map[string]any{"path": "new/dir/f.txt", "content": "x"},
			[]tools.Resource{{"type": "file", "path": "new/dir/f.txt", "access": "write"}}},
		{"write new through directory symlink", NewWriteFile(), map[string]any{"path": "docs-link/n.md", "content": "x"},
			[]tools.Resource{{"type": "file", "path": "docs/n.md", "access": "write"}}},
		{"write through dangling symlink", NewWriteFile(), map[string]any{"path": "dangling", "content": "x"},
			[]tools.Resource{{"type": "file", "path": "docs/fresh.md", "access": "write"}}},
		{"edit", NewEditFile(), map[string]any{"path": "docs-link/guide.md", "old_string": "g", "new_string": "G"},
			[]tools.Resource{{"type": "file", "path": "docs/guide.md", "access": "write"}}},
		{"glob default", NewGlob(), map[string]any{"pattern": "*"},
			[]tools.Resource{{"type": "file", "path": ".", "access": "list", "recursive": true}}},
		{"glob symlinked dir", NewGlob(), map[string]any{"pattern": "*", "path": "docs-link"},
			[]tools.Resource{{"type": "file", "path": "docs", "access": "list", "recursive": true}}},
		{"grep default", NewGrep(), map[string]any{"pattern": "x"},
			[]tools.Resource{{"type": "file", "path": ".", "access": "read", "recursive": true}}},
		{"grep root spelled oddly", NewGrep(), map[string]any{"pattern": "x", "path": "src/.."},
			[]tools.Resource{{"type": "file", "path": ".", "access": "read", "recursive": true}}},
		{"grep one file", NewGrep(), map[string]any{"pattern": "x", "path": "file-link"},
			[]tools.Resource{{"type": "file", "path": "docs/guide.md", "access": "read", "recursive": false}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := mustPrepare(t, c.tool, env, c.args)
			if !reflect.DeepEqual(plan.Resources, c.want) {
				t.Errorf("Resources = %v, want %v", plan.Resources, c.want)
			}
		})
	}
}

func TestOtherBadPathsAreArgErrors(t *testing.T) {
	env, _, _ := pathFixture(t)
	cases := []struct {
		name    string
		tool    tools.Tool
		args    map[string]any
		pointer string
		rule    string
	}{
		{"read missing", NewReadFile(), map[string]any{"path": "nope.txt"}, "/path", "file does not exist"},
		{"edit missing", NewEditFile(), map[string]any{"path": "docs/nope", "old_string": "a", "new_string": "b"}, "/path", "file does not exist"},
		{"read below a file", NewReadFile(), map[string]any{"path": "docs/guide.md/x"}, "/path", wspath.RuleNotDirComp},
		{"write below a file", NewWriteFile(), map[string]any{"path": "docs/guide.md/x", "content": ""}, "/path", wspath.RuleNotDirComp},
		{"write a directory", NewWriteFile(), map[string]any{"path": "docs-link", "content": ""}, "/path", "is a directory, not a file"},
		{"write with .. below a missing dir", NewWriteFile(), map[string]any{"path": "new/../x", "content": ""}, "/path", wspath.RuleDotDotNew},
		{"read a component over 255 bytes", NewReadFile(), map[string]any{"path": "docs/" + strings.Repeat("a", 256)}, "/path", wspath.RuleTooLong},
		{"write a component over 255 bytes", NewWriteFile(), map[string]any{"path": "new/" + strings.Repeat("a", 256), "content": ""}, "/path", wspath.RuleTooLong},
		{"write a path over 4095 bytes", NewWriteFile(), map[string]any{"path": strings.Repeat("d/", 2048), "content": ""}, "/path", wspath.RuleTooLong},
		{"edit a path over 4095 bytes", NewEditFile(), map[string]any{"path": strings.Repeat("d/", 2047) + "dd", "old_string": "a", "new_string": "b"}, "/path", wspath.RuleTooLong},
		{"glob a component over 255 bytes", NewGlob(), map[string]any{"pattern": "*", "path": strings.Repeat("a", 256)}, "/path", wspath.RuleTooLong},
		{"grep a component over 255 bytes", NewGrep(), map[string]any{"pattern": "a", "path": strings.Repeat("a", 256)}, "/path", wspath.RuleTooLong},
		{"glob missing dir", NewGlob(), map[string]any{"pattern": "*", "path": "nope"}, "/path", "does not exist"},
		{"glob on a file", NewGlob(), map[string]any{"pattern": "*", "path": "docs/guide.md"}, "/path", "must be a directory"},
		{"glob bad pattern", NewGlob(), map[string]any{"pattern": "[a"}, "/pattern", "must be a valid glob pattern"},
		{"grep bad regexp", NewGrep(), map[string]any{"pattern": "(a"}, "/pattern", "must be a valid RE2 regular expression"},
		{"grep backreference", NewGrep(), map[string]any{"pattern": `(a)\1`}, "/pattern", "must be a valid RE2 regular expression"},
		{"grep bad glob", NewGrep(), map[string]any{"pattern": "a", "glob": "{a"}, "/glob", "must be a valid glob pattern"},
		{"grep missing", NewGrep(), map[string]any{"pattern": "a", "path": "nope"}, "/path", "does not exist"},
		{"edit no-op", NewEditFile(), map[string]any{"path": "docs/guide.md", "old_string": "g", "new_string": "g"}, "/new_string", "must differ from old_string"},
		{"wrong type", NewReadFile(), map[string]any{"path": 3.0}, "/path", "must be a string"},
		{"fractional offset", NewReadFile(), map[string]any{"path": "docs/guide.md", "offset": 1.5}, "/offset", "must be an integer"},
		{"limit too large", NewReadFile(), map[string]any{"path": "docs/guide.md", "limit": 20000.0}, "/limit", "must be between 1 and 10000"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.tool.Prepare(t.Context(), env, c.args)
			ae := wantArgError(t, err, c.pointer)
			if ae.Rule != c.rule {
				t.Errorf("rule = %q, want %q", ae.Rule, c.rule)
			}
		})
	}
}

func TestToolsWithoutAWorkspaceFailPlainly(t *testing.T) {
	for _, tool := range Tools() {
		_, err := tool.Prepare(t.Context(), &tools.Env{Tenant: "acme"}, argsFor(tool, "x"))
		if err == nil {
			t.Errorf("%s: prepared without a workspace", tool.Spec().Name)
		}
		if _, err := tool.Run(t.Context(), &tools.Env{}, struct{}{}, tool.Spec().Limits); err == nil {
			t.Errorf("%s: ran a foreign artifact", tool.Spec().Name)
		}
	}
}
