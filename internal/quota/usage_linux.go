package quota

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// maxDepth bounds how deep Usage descends (one descriptor per level). A
// deeper tree fails the measurement, which counts the workspace as full:
// nesting must not hide bytes from the count.
const maxDepth = 2048

// Usage is the disk space the tree at dir takes: the allocated bytes
// (st_blocks × 512) of dir and every entry below it, symlinks never
// followed (a link counts its own blocks, not its target's), a file with
// several hard links counted once. It walks by descriptor (openat with
// O_NOFOLLOW), so a directory swapped for a symlink while it runs leads
// nowhere; entries that vanish meanwhile are skipped.
func Usage(dir string) (int64, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return 0, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	w := &walker{total: st.Blocks * 512, seen: map[inode]bool{}}
	if err := w.dir(fd, 0); err != nil {
		return 0, fmt.Errorf("measuring %s: %w", dir, err)
	}
	return w.total, nil
}

type inode struct{ dev, ino uint64 }

type walker struct {
	total int64
	seen  map[inode]bool // files with several links, counted once
}

// dir adds the entries of the directory open as fd (which it closes).
func (w *walker) dir(fd, depth int) error {
	f := os.NewFile(uintptr(fd), "")
	defer f.Close()
	for {
		names, err := f.Readdirnames(256)
		for _, name := range names {
			if err := w.entry(fd, name, depth); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) || (err == nil && len(names) == 0) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func (w *walker) entry(parent int, name string, depth int) error {
	var st unix.Stat_t
	if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // removed meanwhile
		}
		return &os.PathError{Op: "stat", Path: name, Err: err}
	}
	isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
	if !isDir && st.Nlink > 1 {
		id := inode{uint64(st.Dev), st.Ino}
		if w.seen[id] {
			return nil
		}
		w.seen[id] = true
	}
	w.total += st.Blocks * 512
	if !isDir {
		return nil
	}
	if depth >= maxDepth {
		return fmt.Errorf("the tree is more than %d folders deep", maxDepth)
	}
	child, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return nil // removed or replaced meanwhile
		}
		return &os.PathError{Op: "open", Path: name, Err: err}
	}
	return w.dir(child, depth+1)
}
