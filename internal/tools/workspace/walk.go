package workspace

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/internal/wspath"
)

// Walk bounds.
const (
	walkMaxEntries = 100_000
	walkMaxDepth   = 64
	readDirBatch   = 256
)

// errStopWalk ends a walk early without error.
var errStopWalk = errors.New("stop walk")

// walkEntry is one non-directory entry met by a walk. dir is valid only
// during the callback.
type walkEntry struct {
	dir  *os.Root    // the directory holding the entry
	name string      // name in dir
	rel  string      // path relative to the start of the walk
	ws   string      // workspace-relative path
	info fs.FileInfo // Lstat taken when the directory was listed
}

// walker walks a tree through per-directory roots. It visits entries in
// the byte order of their full paths (siblings sorted with a directory
// keyed as "name/"), never follows or descends into symlinks, never enters
// a directory that is not the one it listed, and skips excluded paths.
type walker struct {
	ctx        context.Context
	excl       *excluder
	maxEntries int // 0 means walkMaxEntries
	maxDepth   int // 0 means walkMaxDepth
	visited    int
	incomplete bool // a bound stopped the walk before the end
}

// walk calls fn for every non-directory entry below dir, whose
// workspace-relative path is ws. fn may return errStopWalk.
func (w *walker) walk(dir *os.Root, ws string, fn func(walkEntry) error) error {
	err := w.walkDir(dir, "", ws, 0, fn)
	if errors.Is(err, errStopWalk) {
		return nil
	}
	return err
}

type sortedEntry struct {
	key string
	e   fs.DirEntry
}

func (w *walker) walkDir(dir *os.Root, rel, ws string, depth int, fn func(walkEntry) error) error {
	ents, err := w.list(dir)
	if err != nil {
		if depth > 0 {
			return nil // an unreadable subdirectory is skipped, not fatal
		}
		return err
	}
	for _, se := range ents {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		e := se.e
		info, err := e.Info()
		if err != nil {
			continue // vanished since listing
		}
		name := e.Name()
		childRel, childWS := joinWS(rel, name), joinWS(ws, name)
		if w.excl.match(childWS) {
			continue
		}
		if !info.IsDir() {
			if err := fn(walkEntry{dir: dir, name: name, rel: childRel, ws: childWS, info: info}); err != nil {
				return err
			}
			continue
		}
		if depth+1 > cmp.Or(w.maxDepth, walkMaxDepth) {
			w.incomplete = true
			continue
		}
		sub, err := dir.OpenRoot(name)
		if err != nil {
			continue // removed, or swapped for something we may not enter
		}
		st, err := sub.Stat(".")
		if err != nil || !wspath.SameIdentity(info, st) {
			// Swapped (e.g. for a symlink) after listing: never enter it.
			sub.Close()
			continue
		}
		err = w.walkDir(sub, childRel, childWS, depth+1, fn)
		sub.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// list reads dir's entries, within the walk's entry budget, sorted so that
// a pre-order walk yields full paths in byte order.
func (w *walker) list(dir *os.Root) ([]sortedEntry, error) {
	f, err := dir.Open(".")
	if err != nil {
		return nil, fmt.Errorf("workspace: open directory: %w", err)
	}
	defer f.Close()
	var out []sortedEntry
	full := false
	for !full {
		batch, err := f.ReadDir(readDirBatch)
		for _, e := range batch {
			if w.visited == cmp.Or(w.maxEntries, walkMaxEntries) {
				w.incomplete, full = true, true
				break
			}
			w.visited++
			key := e.Name()
			if e.IsDir() {
				key += "/"
			}
			out = append(out, sortedEntry{key: key, e: e})
		}
		if err == io.EOF || (err == nil && len(batch) == 0) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("workspace: read directory: %w", err)
		}
	}
	slices.SortFunc(out, func(a, b sortedEntry) int { return strings.Compare(a.key, b.key) })
	return out, nil
}
