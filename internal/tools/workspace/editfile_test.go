package workspace

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func TestEditFileReplaces(t *testing.T) {
	const eight = "l1\nl2\nl3\nfoo\nl5\nl6\nl7\nl8\n"
	cases := []struct {
		name    string
		content string
		args    map[string]any
		want    string // file after
		result  string
		count   int
	}{
		{
			name: "one occurrence", content: eight,
			args: map[string]any{"old_string": "foo", "new_string": "bar"},
			want: strings.Replace(eight, "foo", "bar", 1),
			result: "replaced 1 occurrence in f.txt\n--- a/f.txt\n+++ b/f.txt\n" +
				"@@ -1,7 +1,7 @@\n l1\n l2\n l3\n-foo\n+bar\n l5\n l6\n l7\n",
			count: 1,
		},
		{
			name: "delete a whole line", content: eight,
			args: map[string]any{"old_string": "foo\n", "new_string": ""},
			want: "l1\nl2\nl3\nl5\nl6\nl7\nl8\n",
			result: "replaced 1 occurrence in f.txt\n--- a/f.txt\n+++ b/f.txt\n" +
				"@@ -1,7 +1,6 @@\n l1\n l2\n l3\n-foo\n l5\n l6\n l7\n",
			count: 1,
		},
		{
			name: "insert lines at the start", content: "a\nb\n",
			args: map[string]any{"old_string": "a\n", "new_string": "new\na\n"},
			want: "new\na\nb\n",
			result: "replaced 1 occurrence in f.txt\n--- a/f.txt\n+++ b/f.txt\n" +
				"@@ -1,2 +1,3 @@\n-a\n+new\n+a\n b\n",
			count: 1,
		},
		{
			name: "replace_all in separate hunks", content: "x\n1\n2\n3\n4\n5\n6\n7\n8\nx\n",
			args: map[string]any{"old_string": "x", "new_string": "y", "replace_all": true},
			want: "y\n1\n2\n3\n4\n5\n6\n7\n8\ny\n",
			result: "replaced 2 occurrences in f.txt\n--- a/f.txt\n+++ b/f.txt\n" +
				"@@ -1,4 +1,4 @@\n-x\n+y\n 1\n 2\n 3\n" +
				"@@ -7,4 +7,4 @@\n 6\n 7\n 8\n-x\n+y\n",
			count: 2,
		},
		{
			name: "replace_all twice on one line", content: "a x x b\n",
			args: map[string]any{"old_string": "x", "new_string": "yy", "replace_all": true},
			want: "a yy yy b\n",
			result: "replaced 2 occurrences in f.txt\n--- a/f.txt\n+++ b/f.txt\n" +
				"@@ -1,1 +1,1 @@\n-a x x b\n+a yy yy b\n",
			count: 2,
		},
		{
			name: "no final newline", content: "a\nb",
			args: map[string]any{"old_string": "b", "new_string": "c"},
			want: "a\nc",
			result: "replaced 1 occurrence in f.txt\n--- a/f.txt\n+++ b/f.txt\n" +
				"@@ -1,2 +1,2 @@\n a\n-b\n+c\n",
			count: 1,
		},
	}
	tool := NewEditFile()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, dir := testEnv(t)
			writeFiles(t, dir, map[string]string{"f.txt": c.content})
			c.args["path"] = "f.txt"
			res := mustCall(t, tool, env, c.args)
			if got := readHost(t, filepath.Join(dir, "f.txt")); got != c.want {
				t.Errorf("file = %q, want %q", got, c.want)
			}
			if res.Content != c.result {
				t.Errorf("result =\n%s\nwant\n%s", res.Content, c.result)
			}
			if res.Data["replacements"] != c.count {
				t.Errorf("replacements = %v, want %d", res.Data["replacements"], c.count)
			}
		})
	}
}

func TestEditFileNeedsExactlyOneOccurrenceUnlessReplaceAll(t *testing.T) {
	cases := []struct {
		name    string
		content string
		args    map[string]any
		want    string
	}{
		{"not found", "abc\n", map[string]any{"old_string": "zzz", "new_string": "y"}, "old_string not found in file"},
		{"several", "x x\nx\n", map[string]any{"old_string": "x", "new_string": "y"},
			"old_string occurs 3 times; provide more context or set replace_all"},
		{"several, replace_all false", "x x\n", map[string]any{"old_string": "x", "new_string": "y", "replace_all": false},
			"old_string occurs 2 times"},
		{"binary", "x\x00", map[string]any{"old_string": "x", "new_string": "y"}, "binary"},
	}
	tool := NewEditFile()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, dir := testEnv(t)
			writeFiles(t, dir, map[string]string{"f.txt": c.content})
			c.args["path"] = "f.txt"
			_, err := call(t, tool, env, c.args)
			wantModelError(t, err, c.want)
			if got := readHost(t, filepath.Join(dir, "f.txt")); got != c.content {
				t.Errorf("file changed to %q", got)
			}
		})
	}
}

func TestEditFileCapsTheDiffPreview(t *testing.T) {
	env, dir := testEnv(t)
	var b strings.Builder
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&b, "item %d\n", i)
	}
	writeFiles(t, dir, map[string]string{"f.txt": b.String()})
	res := mustCall(t, NewEditFile(), env, map[string]any{
		"path": "f.txt", "old_string": "item", "new_string": "entry", "replace_all": true,
	})
	lines := strings.Split(strings.TrimSuffix(res.Content, "\n"), "\n")
	// count line, two file headers, hunk header, 40 lines, cut notice
	if len(lines) != 1+2+1+diffMaxLines+1 || !strings.HasPrefix(lines[len(lines)-1], "[diff preview cut") {
		t.Errorf("preview has %d lines, ends %q", len(lines), lines[len(lines)-1])
	}
	if !strings.HasPrefix(res.Content, "replaced 100 occurrences in f.txt\n") {
		t.Errorf("result starts %q", lines[0])
	}
	if got := readHost(t, filepath.Join(dir, "f.txt")); strings.Contains(got, "item") {
		t.Error("not every occurrence was replaced")
	}
}
