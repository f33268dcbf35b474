package sandbox

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestPlanWorkspaceWritesOnlyThePathsTheGlobsSpell: the jail builder
// resolves write paths with the tools' resolver (wspath.Resolve) and makes
// a literal or folder writable only when it resolves to itself, so a
// symlink or '..' on the way cannot make another place writable.
func TestPlanWorkspaceWritesOnlyThePathsTheGlobsSpell(t *testing.T) {
	w := t.TempDir()
	outside := t.TempDir()
	for _, d := range []string{"src/pkg", "notes", "secrets"} {
		if err := os.MkdirAll(filepath.Join(w, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"README.md", "secrets/db.env", "notes/a"} {
		if err := os.WriteFile(filepath.Join(w, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{
		"src-link":      "src",            // a folder symlink
		"secrets-link":  "secrets",        // a folder symlink to a protected folder
		"readme-link":   "README.md",      // a file symlink
		"out":           outside,          // an absolute symlink out
		"notes/up-link": "../secrets",     // a relative one climbing across
		"rel-out":       "../" + "escape", // a dangling one above the root
	} {
		if err := os.Symlink(target, filepath.Join(w, name)); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name     string
		writable []string
		want     []string
	}{
		{"a folder tree", []string{"src/**"}, []string{"src"}},
		{"an uncleaned folder tree", []string{"./src/./**"}, []string{"src"}},
		{"a literal file", []string{"README.md"}, []string{"README.md"}},
		{"everything", []string{"**"}, []string{"."}},
		{"a folder symlink is not its target", []string{"src-link/**", "secrets-link/**"}, nil},
		{"a symlink in the middle is not followed", []string{"secrets-link/db.env", "notes/up-link/db.env"}, nil},
		{"a file symlink is not its target", []string{"readme-link"}, nil},
		{"an absolute symlink out", []string{"out/**"}, nil},
		{"dot-dot out of the workspace", []string{"../**", "src/../../**", "rel-out/**"}, nil},
		{"a missing folder", []string{"nope/**", "nope.md"}, nil},
		{"dot-dot inside is the cleaned path", []string{"src/pkg/../../notes/**"}, []string{"notes"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plan, err := planWorkspace(w, nil, c.writable)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(plan.writable, c.want) {
				t.Fatalf("writable %q, want %q", plan.writable, c.want)
			}
		})
	}
}
