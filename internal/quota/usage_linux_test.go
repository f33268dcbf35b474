package quota

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func usage(t *testing.T, dir string) int64 {
	t.Helper()
	n, err := Usage(dir)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func write(t *testing.T, path string, size int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(strings.Repeat("x", size)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Usage counts what a tree takes on disk: its files' allocated blocks,
// wherever they are nested, and nothing a link points at.
func TestUsageCountsAllocatedBytes(t *testing.T) {
	outside := t.TempDir()
	write(t, filepath.Join(outside, "big"), 8<<20)
	ws := t.TempDir()
	empty := usage(t, ws)

	write(t, filepath.Join(ws, "a/b/c/file"), 1<<20)
	withFile := usage(t, ws)
	if grew := withFile - empty; grew < 1<<20 || grew > 1<<20+64<<10 {
		t.Fatalf("a 1 MiB file three folders down grew the count by %d", grew)
	}

	// A symlink counts itself, never its target (outside or inside).
	if err := os.Symlink(filepath.Join(outside, "big"), filepath.Join(ws, "link-out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", filepath.Join(ws, "link-in")); err != nil {
		t.Fatal(err)
	}
	if grew := usage(t, ws) - withFile; grew > 8<<10 {
		t.Fatalf("two symlinks grew the count by %d: a target was followed", grew)
	}
	withLinks := usage(t, ws)

	// A second name of a file is not a second copy.
	if err := os.Link(filepath.Join(ws, "a/b/c/file"), filepath.Join(ws, "hard")); err != nil {
		t.Fatal(err)
	}
	if grew := usage(t, ws) - withLinks; grew > 8<<10 {
		t.Fatalf("a hard link grew the count by %d: the file was counted twice", grew)
	}

	// A sparse file takes what it allocates, not its length.
	f, err := os.Create(filepath.Join(ws, "sparse"))
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(1 << 30)
	f.Close()
	if grew := usage(t, ws) - withLinks; grew > 64<<10 {
		t.Fatalf("a 1 GiB sparse file grew the count by %d", grew)
	}
}

func TestUsageOfAMissingOrLinkedRootFails(t *testing.T) {
	dir := t.TempDir()
	if _, err := Usage(filepath.Join(dir, "gone")); err == nil {
		t.Error("a missing workspace measured")
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := Usage(filepath.Join(dir, "link")); err == nil {
		t.Error("a workspace that is a symlink was followed")
	}
}

// A tree deeper than the walk goes fails the measurement (which counts
// the workspace as full) rather than hiding what lies below.
func TestUsageRefusesATreeTooDeepToCount(t *testing.T) {
	ws := t.TempDir()
	fd, err := unix.Open(ws, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range maxDepth + 1 {
		if err := unix.Mkdirat(fd, "d", 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, "d", unix.O_RDONLY|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	unix.Close(fd)
	if _, err := Usage(ws); err == nil || !strings.Contains(err.Error(), "deep") {
		t.Fatalf("Usage of a %d-deep tree: %v", maxDepth+1, err)
	}
}

func TestOpenChoosesAccountingForAFolderThatIsNoSubvolume(t *testing.T) {
	ws := t.TempDir()
	write(t, filepath.Join(ws, "f"), 300<<10)
	m, err := Open(ws, 1<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Mode() != Accounting || m.Hard() || m.Limit() != 1<<20 {
		t.Fatalf("mode %s hard %v limit %d", m.Mode(), m.Hard(), m.Limit())
	}
	if !strings.Contains(m.Reason(), "not a btrfs subvolume") && !strings.Contains(m.Reason(), "plain folder on btrfs") {
		t.Errorf("reason %q", m.Reason())
	}
	if m.Used() < 300<<10 || m.Room() > 1<<20-300<<10 {
		t.Errorf("measured once at open: used %d room %d", m.Used(), m.Room())
	}
	if _, err := Open(ws, 0, nil); err == nil {
		t.Error("a zero limit opened")
	}
}
