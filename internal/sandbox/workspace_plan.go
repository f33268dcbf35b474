//go:build unix

package sandbox

import (
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/gobwas/glob"
	"github.com/toolgate/toolgate/internal/wspath"
)

// Planning a jail's view of its workspace: which paths are hidden, which
// are writable, and which hard-linked files would let a writable path
// change a protected one. Plain path and glob work, the same on every
// platform with Unix file identities; build_linux.go mounts the plan.

// maxWalkEntries bounds the workspace walk that finds hidden and writable
// paths; a bigger workspace fails closed.
const maxWalkEntries = 500_000

type hiddenPath struct {
	rel string
	dir bool
}

type workspacePlan struct {
	writable []string // workspace-relative, parents before children
	hidden   []hiddenPath
	pins     []string // ancestors of hidden paths, shallowest first
}

// planWorkspace finds, in the workspace mounted at w, the paths to hide (every
// match of a hide glob; nothing below a hidden folder is visited) and the
// paths to make writable: the folder of each "dir/**" glob (or the whole
// workspace for "**"), each existing file a literal glob names, and each
// existing file any other glob matches. Folders a narrower glob would
// cover only in part stay read-only: a write path is never widened.
//
// A literal or folder is made writable only when it is the path it names:
// resolved in the workspace by wspath.Resolve (the tools' resolver) to
// itself, so that no symlink or '..' on the way leads elsewhere — policy
// judged the path the glob spells, and the tools resolve symlinks before
// they judge one.
func planWorkspace(w string, hide, writable []string) (workspacePlan, error) {
	var plan workspacePlan
	hideM, err := compileGlobs(hide)
	if err != nil {
		return plan, err
	}
	root, err := os.OpenRoot(w)
	if err != nil {
		return plan, err
	}
	defer root.Close()
	exact := func(p string) (fs.FileInfo, bool) {
		r, err := wspath.Resolve(root, p, wspath.Options{Mode: wspath.MustExist})
		if err != nil || r.Rel != path.Clean(p) {
			return nil, false
		}
		return r.Info, true
	}
	var walkW []*glob.Pattern
	for _, g := range writable {
		prefix, tree, literal := globRoot(g)
		switch {
		case literal:
			if fi, ok := exact(g); ok && fi.Mode().IsRegular() {
				plan.writable = append(plan.writable, path.Clean(g))
			}
		case tree:
			if fi, ok := exact(prefix); ok && fi.IsDir() {
				plan.writable = append(plan.writable, path.Clean(prefix))
			}
		default:
			c, err := glob.Compile(g, '/')
			if err != nil {
				return plan, err
			}
			walkW = append(walkW, c)
		}
	}
	if len(hideM) > 0 || len(walkW) > 0 {
		pins := map[string]bool{}
		// Hard links: a file with more than one name is hidden under all
		// of its names in the workspace when one of them is hidden.
		hiddenInodes := map[fileID]bool{}
		var linked []linkedFile
		n := 0
		hideAncestors := func(rel string) {
			for a := path.Dir(rel); a != "."; a = path.Dir(a) {
				pins[a] = true
			}
		}
		err := filepath.WalkDir(w, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if p == w {
					return err
				}
				return nil // unreadable entries cannot be read inside either
			}
			if n++; n > maxWalkEntries {
				return fmt.Errorf("workspace has more than %d entries", maxWalkEntries)
			}
			if p == w {
				return nil
			}
			rel := p[len(w)+1:]
			if matchAny(hideM, rel) {
				if d.Type()&fs.ModeSymlink == 0 {
					plan.hidden = append(plan.hidden, hiddenPath{rel: rel, dir: d.IsDir()})
					hideAncestors(rel)
				}
				if d.IsDir() {
					// Walk it only for the identities of its linked files.
					if err := collectLinked(p, hiddenInodes, &n); err != nil {
						return err
					}
					return fs.SkipDir
				}
				if id, ok := linkedID(d); ok {
					hiddenInodes[id] = true
				}
				return nil
			}
			if id, ok := linkedID(d); ok {
				linked = append(linked, linkedFile{rel, id})
			}
			if d.Type().IsRegular() && matchAny(walkW, rel) {
				plan.writable = append(plan.writable, rel)
			}
			return nil
		})
		if err != nil {
			return plan, err
		}
		for _, l := range linked {
			if hiddenInodes[l.id] {
				plan.hidden = append(plan.hidden, hiddenPath{rel: l.rel})
				hideAncestors(l.rel)
			}
		}
		for a := range pins {
			plan.pins = append(plan.pins, a)
		}
	}
	plan.writable = dedupeNested(plan.writable)
	sort.Slice(plan.pins, func(i, j int) bool { return depth(plan.pins[i]) < depth(plan.pins[j]) })
	return plan, nil
}

// fileID is a file's identity on its filesystem.
type fileID struct{ dev, ino uint64 }

type linkedFile struct {
	rel string
	id  fileID
}

// linkedID returns the identity of a regular file with more than one link.
func linkedID(d fs.DirEntry) (fileID, bool) {
	if !d.Type().IsRegular() {
		return fileID{}, false
	}
	fi, err := d.Info()
	if err != nil {
		return fileID{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Nlink < 2 {
		return fileID{}, false
	}
	return fileID{uint64(st.Dev), st.Ino}, true
}

// collectLinked adds the identities of the linked regular files below dir.
func collectLinked(dir string, into map[fileID]bool, n *int) error {
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if *n++; *n > maxWalkEntries {
			return fmt.Errorf("workspace has more than %d entries", maxWalkEntries)
		}
		if id, ok := linkedID(d); ok {
			into[id] = true
		}
		return nil
	})
}

func compileGlobs(gs []string) ([]*glob.Pattern, error) {
	out := make([]*glob.Pattern, 0, len(gs))
	for _, g := range gs {
		c, err := glob.Compile(g, '/')
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

func matchAny(gs []*glob.Pattern, s string) bool {
	for _, g := range gs {
		if g.Match(s) {
			return true
		}
	}
	return false
}

func depth(rel string) int { return strings.Count(rel, "/") }

// dedupeNested sorts paths and drops those under another one ("." covers
// everything).
func dedupeNested(ps []string) []string {
	sort.Strings(ps)
	ps = slices.Compact(ps)
	if slices.Contains(ps, ".") {
		return []string{"."}
	}
	var out []string
	for _, p := range ps {
		if len(out) > 0 {
			last := out[len(out)-1]
			if strings.HasPrefix(p, last+"/") {
				continue
			}
		}
		out = append(out, p)
	}
	return out
}
