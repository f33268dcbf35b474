package shell

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/toolgate/toolgate/internal/tools"
)

// This is a minimal copy of the workspace family's resolver
// (internal/tools/workspace/path.go, unexported there), reduced to what a
// working folder needs: the folder must exist, so there is no missing-target
// handling.

// maxSymlinkHops bounds symlink expansion, as the kernel does.
const maxSymlinkHops = 40

// Rules of the ArgErrors about the working folder. They never echo it.
const (
	ruleInside   = "must stay inside the workspace"
	ruleNUL      = "must not contain a NUL byte"
	ruleNotExist = "folder does not exist"
	ruleNotDir   = "must be a folder"
	ruleLoop     = "has too many levels of symbolic links"
)

// resolveDir resolves name inside root one component at a time, expanding
// symlinks itself, and returns the cleaned, slash-separated, symlink-free
// workspace-relative path of an existing folder ("." is the root) with its
// Lstat for an identity check at run time.
func resolveDir(root *os.Root, pointer, name string) (string, fs.FileInfo, error) {
	argErr := func(rule string) error { return &tools.ArgError{Pointer: pointer, Rule: rule} }
	if strings.IndexByte(name, 0) >= 0 {
		return "", nil, argErr(ruleNUL)
	}
	if isAbs(name) {
		return "", nil, argErr(ruleInside)
	}
	var stack []string
	todo := name
	hops := 0
	for todo != "" {
		var comp string
		comp, todo, _ = strings.Cut(todo, "/")
		switch comp {
		case "", ".":
			continue
		case "..":
			if len(stack) == 0 {
				return "", nil, argErr(ruleInside)
			}
			stack = stack[:len(stack)-1]
			continue
		}
		cand := joinRel(append(stack, comp))
		fi, err := root.Lstat(cand)
		if err != nil {
			switch {
			case errors.Is(err, fs.ErrNotExist):
				return "", nil, argErr(ruleNotExist)
			case errors.Is(err, syscall.ENOTDIR):
				return "", nil, argErr(ruleNotDir)
			case errors.Is(err, syscall.ENAMETOOLONG):
				return "", nil, argErr(ruleNotExist)
			}
			return "", nil, fmt.Errorf("shell: lstat: %w", err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			hops++
			if hops > maxSymlinkHops {
				return "", nil, argErr(ruleLoop)
			}
			target, err := root.Readlink(cand)
			if err != nil {
				return "", nil, fmt.Errorf("shell: readlink: %w", err)
			}
			if target == "" || strings.IndexByte(target, 0) >= 0 || isAbs(target) {
				return "", nil, argErr(ruleInside)
			}
			if todo != "" {
				todo = target + "/" + todo
			} else {
				todo = target
			}
			continue
		}
		if !fi.IsDir() {
			return "", nil, argErr(ruleNotDir)
		}
		stack = append(stack, comp)
	}
	rel := joinRel(stack)
	fi, err := root.Lstat(rel)
	if err != nil {
		return "", nil, fmt.Errorf("shell: lstat: %w", err)
	}
	return rel, fi, nil
}

// joinRel joins resolved components; the empty path is the root, ".".
func joinRel(parts []string) string {
	if len(parts) == 0 {
		return "."
	}
	return strings.Join(parts, "/")
}

// isAbs reports a name that is absolute on any platform.
func isAbs(p string) bool {
	if strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) {
		return true
	}
	return len(p) >= 2 && p[1] == ':' && ((p[0] >= 'a' && p[0] <= 'z') || (p[0] >= 'A' && p[0] <= 'Z'))
}

// hostRel returns the workspace-relative, slash-separated form of the host
// path p, or false when p lies outside the workspace folder dir. It is
// lexical; resolveDir or the os.Root then handles symlinks.
func hostRel(dir, p string) (string, bool) {
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return "", false
	}
	rel = filepath.ToSlash(rel)
	if rel == ".." || strings.HasPrefix(rel, "../") || isAbs(rel) {
		return "", false
	}
	return rel, true
}
