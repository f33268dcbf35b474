package workspace

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWriteFileCreatesAndOverwrites(t *testing.T) {
	env, dir := testEnv(t)
	writeFiles(t, dir, map[string]string{"old.txt": "a much longer original content\n", "docs/x": ""})
	symlink(t, "docs", filepath.Join(dir, "docs-link"))
	cases := []struct {
		name     string
		path     string
		content  string
		want     string
		hostPath string
	}{
		{"new file", "new.txt", "hello", "wrote 5 bytes to new.txt", "new.txt"},
		{"new file below missing directories", "a/b/c.txt", "abc\n", "wrote 4 bytes to a/b/c.txt", "a/b/c.txt"},
		{"overwrite shorter", "old.txt", "short", "wrote 5 bytes to old.txt", "old.txt"},
		{"empty content", "empty.txt", "", "wrote 0 bytes to empty.txt", "empty.txt"},
		{"through an in-workspace symlink", "docs-link/n.md", "n", "wrote 1 bytes to docs/n.md", "docs/n.md"},
		{"uncleaned path", "./a//b/../b/d.txt", "d", "wrote 1 bytes to a/b/d.txt", "a/b/d.txt"},
		{"multibyte content counts bytes", "u.txt", "é", "wrote 2 bytes to u.txt", "u.txt"},
	}
	tool := NewWriteFile()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := mustCall(t, tool, env, map[string]any{"path": c.path, "content": c.content})
			if res.Content != c.want {
				t.Errorf("content = %q, want %q", res.Content, c.want)
			}
			if got := readHost(t, filepath.Join(dir, c.hostPath)); got != c.content {
				t.Errorf("file = %q, want %q", got, c.content)
			}
		})
	}
	if fi, err := os.Lstat(filepath.Join(dir, "docs-link")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the symlink itself was replaced: %v", err)
	}
}

func TestWriteFileRefusesExcludedPaths(t *testing.T) {
	env, dir := testEnv(t)
	tool := NewWriteFile()
	plan := mustPrepare(t, tool, env, map[string]any{"path": "secrets/new.txt", "content": "x"})
	lim := tool.Spec().Limits
	lim.ExcludePaths = []string{"secrets"}
	_, err := tool.Run(t.Context(), env, plan.Artifact, lim)
	wantModelError(t, err, "excluded")
	if _, err := os.Lstat(filepath.Join(dir, "secrets")); !os.IsNotExist(err) {
		t.Errorf("excluded directory was created: %v", err)
	}
}

// What write-file creates — the file and every missing folder — belongs to
// the workspace's owner (the command jail's user), never to the gateway's
// root: a jail must be able to write it, and nothing in the workspace is a
// root-owned file a jail could turn into a privileged program.
func TestWriteFileCreatesWhatTheWorkspaceOwnerOwns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root can give files away")
	}
	env, dir := testEnv(t)
	env.Workspace.SetOwner(65533, 65532)
	mustCall(t, NewWriteFile(), env, map[string]any{"path": "new/deep/file.txt", "content": "x"})
	for _, p := range []string{"new", "new/deep", "new/deep/file.txt"} {
		fi, err := os.Lstat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 65533 || st.Gid != 65532 {
			t.Errorf("%s owned by %d:%d, want 65533:65532", p, st.Uid, st.Gid)
		}
	}
}
