package workspace

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/tools"
)

func numbered(first int, lines ...string) string {
	var b strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&b, "%6d\t%s\n", first+i, l)
	}
	return b.String()
}

func TestReadFileShowsNumberedLines(t *testing.T) {
	env, dir := testEnv(t)
	var many []string
	for i := 1; i <= 5; i++ {
		many = append(many, fmt.Sprintf("line %d", i))
	}
	writeFiles(t, dir, map[string]string{
		"a.txt":    "alpha\nbeta\n\ngamma\n",
		"no-eol":   "one\ntwo",
		"crlf":     "one\r\ntwo\r\n",
		"five":     strings.Join(many, "\n") + "\n",
		"empty":    "",
		"only-eol": "\n",
		"unicode":  "héllo wörld\n",
	})
	cases := []struct {
		name      string
		args      map[string]any
		want      string
		lines     int
		truncated bool
	}{
		{"whole file", map[string]any{"path": "a.txt"}, numbered(1, "alpha", "beta", "", "gamma"), 4, false},
		{"no final newline", map[string]any{"path": "no-eol"}, numbered(1, "one", "two"), 2, false},
		{"carriage returns kept", map[string]any{"path": "crlf"}, numbered(1, "one\r", "two\r"), 2, false},
		{"unicode", map[string]any{"path": "unicode"}, numbered(1, "héllo wörld"), 1, false},
		{"only a newline", map[string]any{"path": "only-eol"}, numbered(1, ""), 1, false},
		{"offset to the end", map[string]any{"path": "five", "offset": 4.0}, numbered(4, "line 4", "line 5"), 2, false},
		{"offset and limit", map[string]any{"path": "five", "offset": 2.0, "limit": 2.0},
			numbered(2, "line 2", "line 3") + "[truncated: showing lines 2-3 of 5; use offset to read more]", 2, true},
		{"limit exactly the rest", map[string]any{"path": "five", "offset": 3.0, "limit": 3.0},
			numbered(3, "line 3", "line 4", "line 5"), 3, false},
		{"offset past the end", map[string]any{"path": "five", "offset": 9.0}, "[offset 9 is past the end of the file (5 lines)]", 0, false},
		{"empty file", map[string]any{"path": "empty"}, "[empty file]", 0, false},
	}
	tool := NewReadFile()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := mustCall(t, tool, env, c.args)
			if res.Content != c.want {
				t.Errorf("content =\n%q\nwant\n%q", res.Content, c.want)
			}
			if res.Data["lines"] != c.lines || res.Data["truncated"] != c.truncated || res.Truncated != c.truncated {
				t.Errorf("data = %v truncated = %v, want lines %d truncated %v", res.Data, res.Truncated, c.lines, c.truncated)
			}
		})
	}
}

func TestReadFileCutsLongLines(t *testing.T) {
	env, dir := testEnv(t)
	writeFiles(t, dir, map[string]string{
		"ascii":   strings.Repeat("x", 2500) + "\nshort\n",
		"unicode": strings.Repeat("é", 2500) + "\n",
		"exact":   strings.Repeat("y", 2000) + "\n",
		"huge":    strings.Repeat("z", 300_000) + "\nafter\n",
	})
	tool := NewReadFile()
	cases := []struct{ path, want string }{
		{"ascii", numbered(1, strings.Repeat("x", 2000)+lineCutMarker, "short")},
		{"unicode", numbered(1, strings.Repeat("é", 2000)+lineCutMarker)},
		{"exact", numbered(1, strings.Repeat("y", 2000))},
		{"huge", numbered(1, strings.Repeat("z", 2000)+lineCutMarker, "after")},
	}
	for _, c := range cases {
		res := mustCall(t, tool, env, map[string]any{"path": c.path})
		if res.Content != c.want {
			t.Errorf("%s: content has %d bytes, want %d", c.path, len(res.Content), len(c.want))
		}
	}
}

func TestReadFileCapsOutputWithANotice(t *testing.T) {
	env, dir := testEnv(t)
	var b strings.Builder
	for i := 1; i <= 1000; i++ {
		fmt.Fprintf(&b, "this is line number %d\n", i)
	}
	writeFiles(t, dir, map[string]string{"big.txt": b.String(), "wide.txt": strings.Repeat("w", 1500) + "\n"})
	tool := NewReadFile()
	lim := tool.Spec().Limits
	lim.MaxOutputBytes = 1000

	plan := mustPrepare(t, tool, env, map[string]any{"path": "big.txt"})
	res, err := tool.Run(t.Context(), env, plan.Artifact, lim)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Content) > lim.MaxOutputBytes {
		t.Errorf("content is %d bytes, cap %d", len(res.Content), lim.MaxOutputBytes)
	}
	n := res.Data["lines"].(int)
	wantNotice := fmt.Sprintf("[truncated: showing lines 1-%d of 1000; use offset to read more]", n)
	if !res.Truncated || !strings.HasSuffix(res.Content, wantNotice) || n < 10 {
		t.Errorf("content ends %q, want notice %q", tail(res.Content), wantNotice)
	}
	if !strings.HasPrefix(res.Content, numbered(1, "this is line number 1")) {
		t.Errorf("content starts %q", res.Content[:40])
	}

	// A single line wider than the budget gets a notice of its own.
	plan = mustPrepare(t, tool, env, map[string]any{"path": "wide.txt"})
	res, err = tool.Run(t.Context(), env, plan.Artifact, lim)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || !strings.Contains(res.Content, "does not fit") || len(res.Content) > lim.MaxOutputBytes {
		t.Errorf("content = %q", res.Content)
	}
	if !utf8.ValidString(res.Content) {
		t.Error("content is not valid UTF-8")
	}
}

func tail(s string) string {
	if len(s) > 100 {
		return s[len(s)-100:]
	}
	return s
}

func TestReadFileRefusesDirectoriesBinariesAndExcludedFiles(t *testing.T) {
	env, dir := testEnv(t)
	writeFiles(t, dir, map[string]string{
		"sub/a.txt":     "a\n",
		"bin.dat":       "text\x00more",
		"secrets/k.txt": "key\n",
		"x/.env":        "K=V\n",
	})
	tool := NewReadFile()
	cases := []struct {
		name    string
		path    string
		exclude []string
		want    string
	}{
		{"directory", "sub", nil, "directory"},
		{"workspace root", ".", nil, "directory"},
		{"binary", "bin.dat", nil, "binary"},
		{"excluded file", "x/.env", []string{"*/.env"}, "excluded"},
		{"below an excluded directory", "secrets/k.txt", []string{"secrets"}, "excluded"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan := mustPrepare(t, tool, env, map[string]any{"path": c.path})
			lim := tool.Spec().Limits
			lim.ExcludePaths = c.exclude
			_, err := tool.Run(t.Context(), env, plan.Artifact, lim)
			wantModelError(t, err, c.want)
			if strings.Contains(err.Error(), dir) {
				t.Errorf("error shows the host path: %v", err)
			}
		})
	}
}

func TestInvalidExcludePatternFailsClosed(t *testing.T) {
	env, dir := testEnv(t)
	writeFiles(t, dir, map[string]string{"a.txt": "a\n"})
	for _, tool := range Tools() {
		plan := mustPrepare(t, tool, env, argsFor(tool, map[bool]string{true: ".", false: "a.txt"}[tool.Spec().Name == "glob"]))
		lim := tool.Spec().Limits
		lim.ExcludePaths = []string{"{unclosed"}
		_, err := tool.Run(t.Context(), env, plan.Artifact, lim)
		if err == nil {
			t.Errorf("%s ran with a broken exclusion", tool.Spec().Name)
		}
		var me *tools.ModelError
		if asModel(err, &me) {
			t.Errorf("%s: a broken exclusion is not model feedback: %v", tool.Spec().Name, err)
		}
	}
	if got := readHost(t, dir+"/a.txt"); got != "a\n" {
		t.Errorf("a.txt = %q", got)
	}
}
