package workspace

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func globFixture(t *testing.T) (envDir func() string, call func(args map[string]any, exclude ...string) string) {
	t.Helper()
	env, dir := testEnv(t)
	writeFiles(t, dir, map[string]string{
		"a.go":           "",
		"src/b.go":       "",
		"src/c.txt":      "",
		"src/deep/d.go":  "",
		".hidden/e.go":   "",
		"secrets/key.go": "",
		"sort/a-c":       "",
		"sort/a/b":       "",
		"sort/a.txt":     "",
		"sort/a0":        "",
	})
	symlink(t, "src", filepath.Join(dir, "link-dir"))
	symlink(t, "a.go", filepath.Join(dir, "link-file"))
	tool := NewGlob()
	return func() string { return dir }, func(args map[string]any, exclude ...string) string {
		t.Helper()
		plan := mustPrepare(t, tool, env, args)
		lim := tool.Spec().Limits
		lim.ExcludePaths = exclude
		res, err := tool.Run(t.Context(), env, plan.Artifact, lim)
		if err != nil {
			t.Fatal(err)
		}
		return res.Content
	}
}

func TestGlobListsSortedMatchingFiles(t *testing.T) {
	_, run := globFixture(t)
	cases := []struct {
		name    string
		args    map[string]any
		exclude []string
		want    []string
	}{
		{"globstar matches at any depth, including the top",
			map[string]any{"pattern": "**/*.go"}, nil,
			[]string{".hidden/e.go", "a.go", "secrets/key.go", "src/b.go", "src/deep/d.go"}},
		{"star stays in one directory", map[string]any{"pattern": "*.go"}, nil, []string{"a.go"}},
		{"relative to the searched directory, listed from the workspace",
			map[string]any{"pattern": "*", "path": "src"}, nil, []string{"src/b.go", "src/c.txt"}},
		{"symlinked directory searched as its target",
			map[string]any{"pattern": "*.go", "path": "link-dir"}, nil, []string{"src/b.go"}},
		{"symlinks are listed, not followed", map[string]any{"pattern": "link-*"}, nil,
			[]string{"link-dir", "link-file"}},
		{"nothing through a symlinked directory", map[string]any{"pattern": "link-dir/**"}, nil, nil},
		{"byte order of full paths", map[string]any{"pattern": "**", "path": "sort"}, nil,
			[]string{"sort/a-c", "sort/a.txt", "sort/a/b", "sort/a0"}},
		{"class and alternatives", map[string]any{"pattern": "src/{[b]*,deep/?.go}"}, nil,
			[]string{"src/b.go", "src/deep/d.go"}},
		{"excluded directory is not entered", map[string]any{"pattern": "**/*.go"}, []string{"secrets", "src/deep"},
			[]string{".hidden/e.go", "a.go", "src/b.go"}},
		{"excluded files by OPA glob semantics", map[string]any{"pattern": "**/*.go"}, []string{"*/*.go"},
			[]string{"a.go", "src/deep/d.go"}},
		{"exclusions are workspace-relative", map[string]any{"pattern": "*", "path": "src"}, []string{"src/c.txt"},
			[]string{"src/b.go"}},
		{"no matches", map[string]any{"pattern": "*.rs"}, nil, []string{"[no matches]"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := run(c.args, c.exclude...)
			want := strings.Join(c.want, "\n")
			if c.want == nil {
				want = "[no matches]"
			}
			if got != want {
				t.Errorf("glob =\n%s\nwant\n%s", got, want)
			}
		})
	}
}

func TestGlobRefusesAnExcludedSearchRoot(t *testing.T) {
	env, dir := testEnv(t)
	writeFiles(t, dir, map[string]string{"secrets/a/k": ""})
	tool := NewGlob()
	plan := mustPrepare(t, tool, env, map[string]any{"pattern": "*", "path": "secrets/a"})
	lim := tool.Spec().Limits
	lim.ExcludePaths = []string{"secrets"}
	_, err := tool.Run(t.Context(), env, plan.Artifact, lim)
	wantModelError(t, err, "excluded")
}

func TestGlobCapsItsOutput(t *testing.T) {
	env, dir := testEnv(t)
	files := map[string]string{}
	for i := 0; i < globMaxMatches+50; i++ {
		files[fmt.Sprintf("d/f%04d.txt", i)] = ""
	}
	writeFiles(t, dir, files)
	tool := NewGlob()

	res := mustCall(t, tool, env, map[string]any{"pattern": "**"})
	lines := strings.Split(res.Content, "\n")
	if len(lines) != globMaxMatches+1 || lines[0] != "d/f0000.txt" || lines[globMaxMatches-1] != "d/f0999.txt" {
		t.Errorf("got %d lines, first %q", len(lines), lines[0])
	}
	if want := "[truncated: showing the first 1000 matches; narrow the pattern or path]"; lines[len(lines)-1] != want || !res.Truncated {
		t.Errorf("last line %q, want %q", lines[len(lines)-1], want)
	}

	plan := mustPrepare(t, tool, env, map[string]any{"pattern": "**"})
	lim := tool.Spec().Limits
	lim.MaxOutputBytes = 500
	res, err := tool.Run(t.Context(), env, plan.Artifact, lim)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Content) > 500 || !res.Truncated || !strings.Contains(res.Content, "[truncated: showing the first") {
		t.Errorf("content (%d bytes) = %q", len(res.Content), res.Content)
	}
}
