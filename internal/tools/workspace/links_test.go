package workspace

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/internal/tools"
)

// hardLink makes link another name of target (both host paths), or skips
// where the file system has no hard links.
func hardLink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Link(target, link); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
}

// TestFileResourcesCarryLinks: a file with several names carries links: N
// in the resource of every file tool, so policy can refuse it; a file with
// one name carries nothing.
func TestFileResourcesCarryLinks(t *testing.T) {
	env, dir := testEnv(t)
	writeFiles(t, dir, map[string]string{"secrets/db.env": "PASS=x\n", "notes/a": "a\n"})
	hardLink(t, filepath.Join(dir, "secrets", "db.env"), filepath.Join(dir, "notes", "innocent"))
	cases := []struct {
		tool tools.Tool
		args map[string]any
	}{
		{NewReadFile(), map[string]any{"path": "notes/innocent"}},
		{NewWriteFile(), map[string]any{"path": "notes/innocent", "content": "x"}},
		{NewEditFile(), map[string]any{"path": "notes/innocent", "old_string": "PASS", "new_string": "x"}},
		{NewGrep(), map[string]any{"pattern": "PASS", "path": "notes/innocent"}},
	}
	for _, c := range cases {
		plan := mustPrepare(t, c.tool, env, c.args)
		if len(plan.Resources) != 1 || plan.Resources[0]["links"] != float64(2) || plan.Resources[0]["path"] != "notes/innocent" {
			t.Errorf("%s: resources %v, want links 2 on notes/innocent", c.tool.Spec().Name, plan.Resources)
		}
		single := copyArgs(c.args)
		single["path"] = "notes/a"
		if c.tool.Spec().Name == "edit-file" {
			single["old_string"] = "a"
		}
		plan = mustPrepare(t, c.tool, env, single)
		if _, ok := plan.Resources[0]["links"]; ok {
			t.Errorf("%s: a file with one name carries links: %v", c.tool.Spec().Name, plan.Resources)
		}
	}
	plan := mustPrepare(t, NewGrep(), env, map[string]any{"pattern": "PASS", "path": "notes"})
	if _, ok := plan.Resources[0]["links"]; ok {
		t.Errorf("a folder carries links: %v", plan.Resources)
	}
}

// writeCase is write-file or edit-file with arguments that change path.
type writeCase struct {
	tool tools.Tool
	args func(path string) map[string]any
}

func writeCases() []writeCase {
	return []writeCase{
		{NewWriteFile(), func(p string) map[string]any { return map[string]any{"path": p, "content": "pwned\n"} }},
		{NewEditFile(), func(p string) map[string]any {
			return map[string]any{"path": p, "old_string": "=", "new_string": "=pwned", "replace_all": true}
		}},
	}
}

// TestWritesRefuseHardLinkedFiles: write-file and edit-file never write a
// file with more than one name, whatever the decision said (a pack that
// allows it): a model-safe tool error, and the other name is unchanged.
func TestWritesRefuseHardLinkedFiles(t *testing.T) {
	for _, c := range writeCases() {
		t.Run(c.tool.Spec().Name, func(t *testing.T) {
			env, dir := testEnv(t)
			writeFiles(t, dir, map[string]string{"secrets/db.env": "PASS=x\n"})
			secret := filepath.Join(dir, "secrets", "db.env")
			hardLink(t, secret, filepath.Join(dir, "innocent"))
			_, err := call(t, c.tool, env, c.args("innocent"))
			wantModelError(t, err, "has 2 hard links")
			if got := readHost(t, secret); got != "PASS=x\n" {
				t.Fatalf("the protected name was written: %q", got)
			}
		})
	}
}

// TestApprovedWriteSwappedForHardLinkIsRefused is the approval swap of
// issue 12: a write to release/VERSION is prepared (and held for a human);
// before it runs, the target is replaced by a hard link to a protected
// file, or a second name of the target is made. Run refuses; the protected
// file is unchanged.
func TestApprovedWriteSwappedForHardLinkIsRefused(t *testing.T) {
	swaps := map[string]func(t *testing.T, dir string){
		"target replaced by a link to the secret": func(t *testing.T, dir string) {
			target := filepath.Join(dir, "release", "VERSION")
			if err := os.Remove(target); err != nil {
				t.Fatal(err)
			}
			hardLink(t, filepath.Join(dir, "secrets", "db.env"), target)
		},
		"a second name made for the target": func(t *testing.T, dir string) {
			hardLink(t, filepath.Join(dir, "release", "VERSION"), filepath.Join(dir, "secrets", "copy.env"))
		},
	}
	for _, c := range writeCases() {
		for name, swap := range swaps {
			t.Run(c.tool.Spec().Name+"/"+name, func(t *testing.T) {
				env, dir := testEnv(t)
				writeFiles(t, dir, map[string]string{"secrets/db.env": "PASS=x\n", "release/VERSION": "v=1\n"})
				plan := mustPrepare(t, c.tool, env, c.args("release/VERSION"))
				if _, ok := plan.Resources[0]["links"]; ok {
					t.Fatalf("the prepared target had one name: %v", plan.Resources)
				}
				swap(t, dir)
				_, err := c.tool.Run(t.Context(), env, plan.Artifact, c.tool.Spec().Limits)
				wantModelError(t, err, "hard links")
				if got := readHost(t, filepath.Join(dir, "secrets", "db.env")); got != "PASS=x\n" {
					t.Fatalf("the protected file was written: %q", got)
				}
				if got := readHost(t, filepath.Join(dir, "release", "VERSION")); got == "pwned\n" || got == "v=pwned1\n" {
					t.Fatalf("the write went through: %q", got)
				}
			})
		}
	}
	// A target that did not exist at prepare and is a hard link at run
	// time: created with O_EXCL, so the link is never opened.
	env, dir := testEnv(t)
	writeFiles(t, dir, map[string]string{"secrets/db.env": "PASS=x\n", "release/.keep": ""})
	tool := NewWriteFile()
	plan := mustPrepare(t, tool, env, map[string]any{"path": "release/NEW", "content": "pwned"})
	hardLink(t, filepath.Join(dir, "secrets", "db.env"), filepath.Join(dir, "release", "NEW"))
	_, err := tool.Run(t.Context(), env, plan.Artifact, tool.Spec().Limits)
	wantChanged(t, err)
	if got := readHost(t, filepath.Join(dir, "secrets", "db.env")); got != "PASS=x\n" {
		t.Fatalf("the protected file was written: %q", got)
	}
}
