package wspath

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLinks(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a")
	if err := os.WriteFile(a, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	lstat := func(p string) os.FileInfo {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	if n := Links(lstat(a)); n != 1 {
		t.Fatalf("one name: links %d, want 1", n)
	}
	r := AddLinks(map[string]any{}, lstat(a))
	if _, ok := r["links"]; ok {
		t.Fatalf("a single-link file carries links: %v", r)
	}
	if err := os.Link(a, filepath.Join(dir, "b")); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	if n := Links(lstat(a)); n != 2 {
		t.Fatalf("two names: links %d, want 2", n)
	}
	if r := AddLinks(map[string]any{}, lstat(a)); r["links"] != float64(2) {
		t.Fatalf("links member %v, want 2", r["links"])
	}
	if n := Links(lstat(dir)); n != 1 {
		t.Fatalf("a folder: links %d, want 1 (only regular files count)", n)
	}
	if n := Links(nil); n != 1 {
		t.Fatalf("nil: links %d", n)
	}
}
