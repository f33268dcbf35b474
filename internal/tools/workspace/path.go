package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"

	"github.com/toolgate/toolgate/internal/tools"
)

// maxSymlinkHops bounds symlink expansion during resolution, as the kernel
// does (ELOOP after 40 links).
const maxSymlinkHops = 40

// Rules of the ArgErrors about paths. They never echo the path itself.
const (
	ruleInside     = "must stay inside the workspace"
	ruleNUL        = "must not contain a NUL byte"
	ruleNotExist   = "file does not exist"
	ruleLoop       = "has too many levels of symbolic links"
	ruleNotDirComp = "has a component that is not a directory"
	ruleTooLong    = "has a component that is too long"
	ruleDotDotNew  = "must not use '..' after a directory that does not exist"
)

// resolved is a path resolved inside the workspace at prepare time.
type resolved struct {
	// rel is the cleaned, slash-separated, symlink-free workspace-relative
	// path of the target; "." is the workspace root.
	rel string
	// info is the Lstat of rel, the identity Run compares against; nil when
	// the target does not exist (only with allowMissing).
	info fs.FileInfo
	// For a missing target: parent is the deepest existing ancestor (a
	// directory, symlink-free), parentInfo its identity, and missing the
	// components below it that do not exist yet (the last is the file name).
	parent     string
	parentInfo fs.FileInfo
	missing    []string
}

// resolvePath resolves name inside root the way the kernel would, one
// component at a time, expanding symlinks itself (root.Lstat, root.Readlink)
// so that the result names the real target. Absolute names, NUL bytes,
// absolute symlinks and anything that climbs above the root are refused with
// an *tools.ArgError on pointer. A missing target is an error unless
// allowMissing.
func resolvePath(root *os.Root, pointer, name string, allowMissing bool) (resolved, error) {
	argErr := func(rule string) error { return &tools.ArgError{Pointer: pointer, Rule: rule} }
	if strings.IndexByte(name, 0) >= 0 {
		return resolved{}, argErr(ruleNUL)
	}
	if isAbs(name) {
		return resolved{}, argErr(ruleInside)
	}

	var stack []string  // resolved, existing, symlink-free components
	var top fs.FileInfo // Lstat of the last component of stack, if known
	todo := name
	hops := 0
	for todo != "" {
		var comp string
		comp, todo = nextComponent(todo)
		switch comp {
		case "", ".":
			continue
		case "..":
			if len(stack) == 0 {
				return resolved{}, argErr(ruleInside)
			}
			stack = stack[:len(stack)-1]
			top = nil
			continue
		}
		cand := joinRel(append(stack, comp))
		fi, err := root.Lstat(cand)
		if err != nil {
			switch {
			case errors.Is(err, fs.ErrNotExist):
				return missingTarget(root, pointer, stack, comp, todo, allowMissing)
			case errors.Is(err, syscall.ENAMETOOLONG):
				return resolved{}, argErr(ruleTooLong)
			case errors.Is(err, syscall.ENOTDIR):
				return resolved{}, argErr(ruleNotDirComp)
			}
			return resolved{}, fmt.Errorf("workspace: lstat: %w", err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			hops++
			if hops > maxSymlinkHops {
				return resolved{}, argErr(ruleLoop)
			}
			target, err := root.Readlink(cand)
			if err != nil {
				return resolved{}, fmt.Errorf("workspace: readlink: %w", err)
			}
			if target == "" || strings.IndexByte(target, 0) >= 0 || isAbs(target) {
				return resolved{}, argErr(ruleInside)
			}
			// The link's target is relative to the directory holding it,
			// which is exactly the current stack.
			if todo != "" {
				todo = target + "/" + todo
			} else {
				todo = target
			}
			continue
		}
		if !fi.IsDir() && hasMoreComponents(todo) {
			return resolved{}, argErr(ruleNotDirComp)
		}
		stack = append(stack, comp)
		top = fi
	}
	rel := joinRel(stack)
	if top == nil {
		fi, err := root.Lstat(rel)
		if err != nil {
			return resolved{}, fmt.Errorf("workspace: lstat: %w", err)
		}
		top = fi
	}
	return resolved{rel: rel, info: top}, nil
}

// missingTarget finishes resolution once component comp of the existing
// directory stack does not exist: the rest is taken literally, since nothing
// below a missing directory can be a symlink yet.
func missingTarget(root *os.Root, pointer string, stack []string, comp, todo string, allowMissing bool) (resolved, error) {
	argErr := func(rule string) error { return &tools.ArgError{Pointer: pointer, Rule: rule} }
	missing := []string{comp}
	sawDotDot := false
	depth := len(stack) + 1
	for todo != "" {
		var c string
		c, todo = nextComponent(todo)
		switch c {
		case "", ".":
			continue
		case "..":
			// Report an escape as such even though the kernel would stop
			// at the missing directory first.
			sawDotDot = true
			depth--
			if depth < 0 {
				return resolved{}, argErr(ruleInside)
			}
			continue
		}
		depth++
		missing = append(missing, c)
	}
	if !allowMissing {
		return resolved{}, argErr(ruleNotExist)
	}
	if sawDotDot {
		return resolved{}, argErr(ruleDotDotNew)
	}
	parent := joinRel(stack)
	pi, err := root.Lstat(parent)
	if err != nil {
		return resolved{}, fmt.Errorf("workspace: lstat parent: %w", err)
	}
	if !pi.IsDir() {
		return resolved{}, argErr(ruleNotDirComp)
	}
	for _, m := range missing {
		if len(m) > 255 {
			return resolved{}, argErr(ruleTooLong)
		}
	}
	return resolved{
		rel:        joinRel(append(append([]string(nil), stack...), missing...)),
		parent:     parent,
		parentInfo: pi,
		missing:    missing,
	}, nil
}

// nextComponent splits the first slash-separated component off p.
func nextComponent(p string) (comp, rest string) {
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i], p[i+1:]
	}
	return p, ""
}

// hasMoreComponents reports whether rest names anything beyond "." and
// empty components.
func hasMoreComponents(rest string) bool {
	for rest != "" {
		var c string
		c, rest = nextComponent(rest)
		if c != "" && c != "." {
			return true
		}
	}
	return false
}

// joinRel joins resolved components; the empty path is the root, ".".
func joinRel(parts []string) string {
	if len(parts) == 0 {
		return "."
	}
	return strings.Join(parts, "/")
}

// isAbs reports a name that is absolute on any platform we might run on:
// a leading slash or backslash, or a Windows volume name.
func isAbs(p string) bool {
	if strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) {
		return true
	}
	return len(p) >= 2 && p[1] == ':' && ((p[0] >= 'a' && p[0] <= 'z') || (p[0] >= 'A' && p[0] <= 'Z'))
}

// sameIdentity reports whether two FileInfos describe the same file (device
// and inode) of the same type.
func sameIdentity(a, b fs.FileInfo) bool {
	if a == nil || b == nil {
		return false
	}
	return a.Mode().Type() == b.Mode().Type() && os.SameFile(a, b)
}

// stillSame re-resolves a prepared target and reports whether it still
// resolves to the same path and file. Run uses it to tell a changed target
// from an ordinary I/O error after an open fails.
func stillSame(root *os.Root, r resolved) bool {
	now, err := resolvePath(root, "", r.rel, r.info == nil)
	if err != nil || now.rel != r.rel {
		return false
	}
	if r.info != nil {
		return sameIdentity(r.info, now.info)
	}
	return now.info == nil && now.parent == r.parent && sameIdentity(r.parentInfo, now.parentInfo)
}

// errChanged wraps tools.ErrTargetChanged with what was found.
func errChanged(what string) error {
	return fmt.Errorf("workspace: %s: %w", what, tools.ErrTargetChanged)
}

// openErr classifies a failure to open a prepared target: a target that no
// longer resolves as prepared is a change, anything else an I/O error.
func openErr(root *os.Root, r resolved, err error) error {
	if !stillSame(root, r) {
		return fmt.Errorf("workspace: open: %w (%v)", tools.ErrTargetChanged, err)
	}
	if errors.Is(err, fs.ErrPermission) {
		return &tools.ModelError{Message: "permission denied"}
	}
	return fmt.Errorf("workspace: open: %w", err)
}
