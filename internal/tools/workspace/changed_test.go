package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/tools"
)

// replaceWithSymlink atomically puts a symlink to target where name was.
func replaceWithSymlink(t *testing.T, target, name string) {
	t.Helper()
	tmp := name + ".swap"
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, name); err != nil {
		t.Fatal(err)
	}
}

// replaceDirWithSymlink moves directory name aside and puts a symlink to
// target in its place.
func replaceDirWithSymlink(t *testing.T, target, name string) {
	t.Helper()
	if err := os.Rename(name, name+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

// replaceFile puts a new file (new inode) with content where name was.
func replaceFile(t *testing.T, name, content string) {
	t.Helper()
	tmp := name + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, name); err != nil {
		t.Fatal(err)
	}
}

func TestReadOfASymlinkSwappedInAfterPrepareIsRefused(t *testing.T) {
	env, dir := testEnv(t)
	writeFiles(t, dir, map[string]string{"a/x": "harmless\n", "secret.txt": "TOP SECRET\n"})
	tool := NewReadFile()
	plan := mustPrepare(t, tool, env, map[string]any{"path": "a/x"})

	replaceWithSymlink(t, "../secret.txt", filepath.Join(dir, "a/x"))

	res, err := tool.Run(t.Context(), env, plan.Artifact, tool.Spec().Limits)
	wantChanged(t, err)
	if strings.Contains(res.Content, "SECRET") || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("secret leaked: %q / %v", res.Content, err)
	}
}

func TestReadOfADirectorySwappedForASymlinkIsRefused(t *testing.T) {
	env, dir := testEnv(t)
	writeFiles(t, dir, map[string]string{"a/x": "harmless\n", "private/x": "TOP SECRET\n"})
	tool := NewReadFile()
	plan := mustPrepare(t, tool, env, map[string]any{"path": "a/x"})

	replaceDirWithSymlink(t, "private", filepath.Join(dir, "a"))

	res, err := tool.Run(t.Context(), env, plan.Artifact, tool.Spec().Limits)
	wantChanged(t, err)
	if strings.Contains(res.Content, "SECRET") {
		t.Fatalf("secret leaked: %q", res.Content)
	}
}

func TestTargetsReplacedAfterPrepareAreRefused(t *testing.T) {
	cases := []struct {
		name   string
		tool   tools.Tool
		args   map[string]any
		change func(t *testing.T, dir string)
		check  func(t *testing.T, dir string) // the new target is untouched
	}{
		{
			name: "read-file of a file replaced by another inode",
			tool: NewReadFile(), args: map[string]any{"path": "f.txt"},
			change: func(t *testing.T, dir string) { replaceFile(t, filepath.Join(dir, "f.txt"), "other\n") },
		},
		{
			name: "read-file of a file removed",
			tool: NewReadFile(), args: map[string]any{"path": "f.txt"},
			change: func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "f.txt")) },
		},
		{
			name: "read-file of a file swapped for a symlink out of the workspace",
			tool: NewReadFile(), args: map[string]any{"path": "f.txt"},
			change: func(t *testing.T, dir string) {
				replaceWithSymlink(t, "../../../../../../../../etc/hostname", filepath.Join(dir, "f.txt"))
			},
		},
		{
			name: "write-file over a file replaced by another inode",
			tool: NewWriteFile(), args: map[string]any{"path": "f.txt", "content": "mine"},
			change: func(t *testing.T, dir string) { replaceFile(t, filepath.Join(dir, "f.txt"), "theirs") },
			check: func(t *testing.T, dir string) {
				if got := readHost(t, filepath.Join(dir, "f.txt")); got != "theirs" {
					t.Errorf("replacement file changed to %q", got)
				}
			},
		},
		{
			name: "write-file over a file swapped for a symlink",
			tool: NewWriteFile(), args: map[string]any{"path": "f.txt", "content": "mine"},
			change: func(t *testing.T, dir string) { replaceWithSymlink(t, "other/keep.txt", filepath.Join(dir, "f.txt")) },
			check: func(t *testing.T, dir string) {
				if got := readHost(t, filepath.Join(dir, "other/keep.txt")); got != "keep" {
					t.Errorf("symlink target changed to %q", got)
				}
			},
		},
		{
			name: "write-file of a new file created meanwhile by someone else",
			tool: NewWriteFile(), args: map[string]any{"path": "new.txt", "content": "mine"},
			change: func(t *testing.T, dir string) { writeFiles(t, dir, map[string]string{"new.txt": "theirs"}) },
			check: func(t *testing.T, dir string) {
				if got := readHost(t, filepath.Join(dir, "new.txt")); got != "theirs" {
					t.Errorf("file created meanwhile changed to %q", got)
				}
			},
		},
		{
			name: "write-file of a new file whose name became a symlink",
			tool: NewWriteFile(), args: map[string]any{"path": "new.txt", "content": "mine"},
			change: func(t *testing.T, dir string) { symlink(t, "other/planted.txt", filepath.Join(dir, "new.txt")) },
			check: func(t *testing.T, dir string) {
				if _, err := os.Lstat(filepath.Join(dir, "other/planted.txt")); !os.IsNotExist(err) {
					t.Errorf("write went through the planted symlink: %v", err)
				}
			},
		},
		{
			name: "write-file of a new file whose parent was swapped for a symlink",
			tool: NewWriteFile(), args: map[string]any{"path": "sub/new.txt", "content": "mine"},
			change: func(t *testing.T, dir string) { replaceDirWithSymlink(t, "other", filepath.Join(dir, "sub")) },
			check: func(t *testing.T, dir string) {
				if _, err := os.Lstat(filepath.Join(dir, "other/new.txt")); !os.IsNotExist(err) {
					t.Errorf("write landed in the symlink's target: %v", err)
				}
			},
		},
		{
			name: "write-file over an existing file whose parent was swapped for a symlink",
			tool: NewWriteFile(), args: map[string]any{"path": "sub/keep.txt", "content": "mine"},
			change: func(t *testing.T, dir string) { replaceDirWithSymlink(t, "other", filepath.Join(dir, "sub")) },
			check: func(t *testing.T, dir string) {
				if got := readHost(t, filepath.Join(dir, "other/keep.txt")); got != "keep" {
					t.Errorf("symlink target changed to %q", got)
				}
			},
		},
		{
			name: "write-file below a directory that became a symlink meanwhile",
			tool: NewWriteFile(), args: map[string]any{"path": "n1/n2/f.txt", "content": "mine"},
			change: func(t *testing.T, dir string) { symlink(t, "other", filepath.Join(dir, "n1")) },
			check: func(t *testing.T, dir string) {
				if _, err := os.Lstat(filepath.Join(dir, "other/n2")); !os.IsNotExist(err) {
					t.Errorf("write created directories in the symlink's target: %v", err)
				}
			},
		},
		{
			name: "write-file below a folder whose name became a file meanwhile",
			tool: NewWriteFile(), args: map[string]any{"path": "n1/n2/f.txt", "content": "mine"},
			change: func(t *testing.T, dir string) { writeFiles(t, dir, map[string]string{"n1": "a file"}) },
			check: func(t *testing.T, dir string) {
				if got := readHost(t, filepath.Join(dir, "n1")); got != "a file" {
					t.Errorf("the file became %q", got)
				}
			},
		},
		{
			name: "edit-file of a file replaced by another inode",
			tool: NewEditFile(), args: map[string]any{"path": "f.txt", "old_string": "orig", "new_string": "mine"},
			change: func(t *testing.T, dir string) { replaceFile(t, filepath.Join(dir, "f.txt"), "orig theirs") },
			check: func(t *testing.T, dir string) {
				if got := readHost(t, filepath.Join(dir, "f.txt")); got != "orig theirs" {
					t.Errorf("replacement file changed to %q", got)
				}
			},
		},
		{
			name: "glob of a directory swapped for a symlink",
			tool: NewGlob(), args: map[string]any{"pattern": "*", "path": "sub"},
			change: func(t *testing.T, dir string) { replaceDirWithSymlink(t, "other", filepath.Join(dir, "sub")) },
		},
		{
			name: "grep of a directory swapped for a symlink",
			tool: NewGrep(), args: map[string]any{"pattern": "keep", "path": "sub"},
			change: func(t *testing.T, dir string) { replaceDirWithSymlink(t, "other", filepath.Join(dir, "sub")) },
		},
		{
			name: "grep of a file swapped for a symlink",
			tool: NewGrep(), args: map[string]any{"pattern": "keep", "path": "f.txt"},
			change: func(t *testing.T, dir string) { replaceWithSymlink(t, "other/keep.txt", filepath.Join(dir, "f.txt")) },
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env, dir := testEnv(t)
			writeFiles(t, dir, map[string]string{
				"f.txt": "orig", "sub/keep.txt": "keep", "other/keep.txt": "keep",
			})
			plan := mustPrepare(t, c.tool, env, c.args)
			c.change(t, dir)
			res, err := c.tool.Run(t.Context(), env, plan.Artifact, c.tool.Spec().Limits)
			wantChanged(t, err)
			if res.Content != "" {
				t.Errorf("content returned with the error: %q", res.Content)
			}
			if c.check != nil {
				c.check(t, dir)
			}
		})
	}
}

func TestUnchangedTargetsRunAfterPrepare(t *testing.T) {
	env, dir := testEnv(t)
	writeFiles(t, dir, map[string]string{"f.txt": "orig"})
	tool := NewWriteFile()
	plan := mustPrepare(t, tool, env, map[string]any{"path": "f.txt", "content": "new"})
	// Content changes in place keep the identity: that is not a new target.
	if err := os.WriteFile(filepath.Join(dir, "f.txt"), []byte("edited meanwhile"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := tool.Run(t.Context(), env, plan.Artifact, tool.Spec().Limits); err != nil {
		t.Fatal(err)
	}
	if got := readHost(t, filepath.Join(dir, "f.txt")); got != "new" {
		t.Errorf("file = %q", got)
	}
}

// A folder that another call created after this one was prepared is no
// conflict: the write lands in it (the path is what policy decided).
func TestWriteBelowAFolderAnotherCallCreatedMeanwhile(t *testing.T) {
	env, dir := testEnv(t)
	tool := NewWriteFile()
	plan := mustPrepare(t, tool, env, map[string]any{"path": "n1/n2/f.txt", "content": "mine"})
	if err := os.MkdirAll(filepath.Join(dir, "n1/n2"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := tool.Run(t.Context(), env, plan.Artifact, tool.Spec().Limits); err != nil {
		t.Fatalf("write below a folder created meanwhile: %v", err)
	}
	if got := readHost(t, filepath.Join(dir, "n1/n2/f.txt")); got != "mine" {
		t.Errorf("file = %q", got)
	}
}

// Concurrent first writes into one new folder all succeed (a chaos run
// saw 2-14 of 1,000 fail with "directory appeared after prepare").
func TestConcurrentFirstWritesIntoANewFolder(t *testing.T) {
	env, dir := testEnv(t)
	tool := NewWriteFile()
	const n = 32
	plans := make([]tools.Plan, n)
	for i := range plans {
		plans[i] = mustPrepare(t, tool, env, map[string]any{"path": fmt.Sprintf("new/deep/f%d.txt", i), "content": "x"})
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range plans {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = tool.Run(t.Context(), env, plans[i].Artifact, tool.Spec().Limits)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("write %d: %v", i, err)
		}
		if got := readHost(t, filepath.Join(dir, fmt.Sprintf("new/deep/f%d.txt", i))); got != "x" {
			t.Errorf("f%d = %q", i, got)
		}
	}
}
