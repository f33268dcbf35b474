package workspace

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestGrepFindsMatchingLines(t *testing.T) {
	env, dir := testEnv(t)
	writeFiles(t, dir, map[string]string{
		"a.go":            "package a\nfunc Foo() {}\n",
		"src/b.go":        "// foo\nx := foo()\nfoo",
		"src/c.txt":       "foo in text\n",
		"src/bin.dat":     "foo\x00foo\n",
		"secrets/key.txt": "foo=secret\n",
		"z.txt":           "line one\nbar\n\nfoo bar\n",
	})
	symlink(t, "a.go", filepath.Join(dir, "link.go"))
	symlink(t, "src", filepath.Join(dir, "link-dir"))
	cases := []struct {
		name    string
		args    map[string]any
		exclude []string
		want    []string
	}{
		{"plain", map[string]any{"pattern": "foo"}, nil, []string{
			"secrets/key.txt:1:foo=secret",
			"src/b.go:1:// foo", "src/b.go:2:x := foo()", "src/b.go:3:foo",
			"src/c.txt:1:foo in text", "z.txt:4:foo bar",
		}},
		{"ignore case", map[string]any{"pattern": "FOO\\(", "ignore_case": true}, nil, []string{
			"a.go:2:func Foo() {}", "src/b.go:2:x := foo()",
		}},
		{"line anchors", map[string]any{"pattern": "^foo|^bar$"}, nil, []string{
			"secrets/key.txt:1:foo=secret", "src/b.go:3:foo", "src/c.txt:1:foo in text", "z.txt:2:bar", "z.txt:4:foo bar",
		}},
		{"text anchors apply per line", map[string]any{"pattern": `\Abar\z`}, nil, []string{"z.txt:2:bar"}},
		{"empty lines", map[string]any{"pattern": "^$", "path": "z.txt"}, nil, []string{"z.txt:3:"}},
		{"name filter", map[string]any{"pattern": "foo", "glob": "*.go"}, nil, []string{
			"src/b.go:1:// foo", "src/b.go:2:x := foo()", "src/b.go:3:foo",
		}},
		{"name filter in a subdirectory", map[string]any{"pattern": "foo", "path": "src", "glob": "*.txt"}, nil,
			[]string{"src/c.txt:1:foo in text"}},
		{"path filter", map[string]any{"pattern": "foo", "glob": "src/*.txt"}, nil,
			[]string{"src/c.txt:1:foo in text"}},
		{"path filter relative to the searched directory", map[string]any{"pattern": "foo", "path": "src", "glob": "**/b.go"}, nil,
			[]string{"src/b.go:1:// foo", "src/b.go:2:x := foo()", "src/b.go:3:foo"}},
		{"single file", map[string]any{"pattern": "foo", "path": "src/c.txt"}, nil, []string{"src/c.txt:1:foo in text"}},
		{"single file through a symlink", map[string]any{"pattern": "Foo", "path": "link.go"}, nil, []string{"a.go:2:func Foo() {}"}},
		{"excluded directory", map[string]any{"pattern": "foo"}, []string{"secrets", "src/*.go"}, []string{
			"src/c.txt:1:foo in text", "z.txt:4:foo bar",
		}},
		{"no matches", map[string]any{"pattern": "nothing here"}, nil, []string{"[no matches]"}},
	}
	tool := NewGrep()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := mustPrepare(t, tool, env, c.args)
			lim := tool.Spec().Limits
			lim.ExcludePaths = c.exclude
			res, err := tool.Run(t.Context(), env, plan.Artifact, lim)
			if err != nil {
				t.Fatal(err)
			}
			if want := strings.Join(c.want, "\n"); res.Content != want {
				t.Errorf("grep =\n%s\nwant\n%s", res.Content, want)
			}
		})
	}
}

func TestGrepSkipsBinaryAndLargeFiles(t *testing.T) {
	env, dir := testEnv(t)
	writeFiles(t, dir, map[string]string{
		"bin.dat":  strings.Repeat("needle\n", 10) + "\x00",
		"late.dat": strings.Repeat("x", binarySniffBytes) + "\x00needle\n", // NUL past the sniff window: text
		"big.txt":  "needle\n" + strings.Repeat("x", grepMaxFileBytes),
		"ok.txt":   "needle\n",
	})
	res := mustCall(t, NewGrep(), env, map[string]any{"pattern": "needle"})
	want := "late.dat:1:" + strings.Repeat("x", grepMaxLineRunes) + lineCutMarker + "\nok.txt:1:needle"
	if res.Content != want {
		t.Errorf("grep = %q", tail(res.Content))
	}
	if res.Data["skipped"] != 2 {
		t.Errorf("skipped = %v, want 2", res.Data["skipped"])
	}
}

func TestGrepCapsItsOutput(t *testing.T) {
	env, dir := testEnv(t)
	var b strings.Builder
	for i := 0; i < grepMaxMatches+10; i++ {
		fmt.Fprintf(&b, "match %d\n", i)
	}
	writeFiles(t, dir, map[string]string{"a.txt": b.String(), "b.txt": "match\n"})
	tool := NewGrep()
	res := mustCall(t, tool, env, map[string]any{"pattern": "match"})
	lines := strings.Split(res.Content, "\n")
	if len(lines) != grepMaxMatches+1 || lines[grepMaxMatches-1] != "a.txt:1000:match 999" {
		t.Errorf("%d lines, last match %q", len(lines), lines[grepMaxMatches-1])
	}
	if want := "[truncated: showing the first 1000 matches; narrow the pattern, path or glob]"; lines[len(lines)-1] != want || !res.Truncated {
		t.Errorf("notice = %q", lines[len(lines)-1])
	}

	plan := mustPrepare(t, tool, env, map[string]any{"pattern": "match"})
	lim := tool.Spec().Limits
	lim.MaxOutputBytes = 400
	res, err := tool.Run(t.Context(), env, plan.Artifact, lim)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Content) > 400 || !res.Truncated || !strings.HasPrefix(res.Content, "a.txt:1:match 0\n") {
		t.Errorf("content (%d bytes) = %q", len(res.Content), res.Content)
	}
}

// The multi-line prefilter is an optimisation only: with or without it,
// the same lines match.
func TestGrepPrefilterNeverChangesResults(t *testing.T) {
	text := []byte("alpha beta\n\nGamma delta\r\nfoo(bar)\n  indented\nend\nfoo\nx\ty\n")
	patterns := []string{
		"a", "^", "$", "^$", "^a", "a$", `\bbeta\b`, "(?s)alpha.*delta", `a\s+b`, `\s`, `[^x]y`,
		"(?-m)^G", `\Aend\z`, "delta\r$", "foo\\(", `^\s+\w+$`, "(?i)gamma", "x*", ".",
	}
	for _, p := range patterns {
		for _, fold := range []bool{false, true} {
			flags := ""
			if fold {
				flags = "(?i)"
			}
			re := regexp.MustCompile(flags + p)
			with := &grepRun{a: &grepArtifact{re: re, pre: prefilter(p, fold)}, budget: 1 << 20}
			without := &grepRun{a: &grepArtifact{re: re}, budget: 1 << 20}
			with.scan(text, "f")
			without.scan(text, "f")
			if with.out.String() != without.out.String() {
				t.Errorf("pattern %q fold %v:\nwith prefilter\n%s\nwithout\n%s", p, fold, with.out.String(), without.out.String())
			}
		}
	}
}
