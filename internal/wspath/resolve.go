package wspath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/toolgate/toolgate/internal/tools"
)

// MaxSymlinkHops bounds symlink expansion during resolution, as the kernel
// does (ELOOP after 40 links).
const MaxSymlinkHops = 40

// Length limits of a workspace name, the kernel's (NAME_MAX and PATH_MAX,
// whose 4096 bytes include the terminating NUL). A name over them could
// not be opened by a program, so the strict modes refuse it up front with
// RuleTooLong, and so does a resolved path over MaxPath.
const (
	MaxComponent = 255
	MaxPath      = 4095
)

// Rules of the ArgErrors Resolve returns. They never echo the name.
const (
	RuleInside         = "must stay inside the workspace"
	RuleNUL            = "must not contain a NUL byte"
	RuleFileNotExist   = "file does not exist"
	RuleFolderNotExist = "folder does not exist"
	RuleNotFolder      = "must be a folder"
	RuleLoop           = "has too many levels of symbolic links"
	RuleNotDirComp     = "has a component that is not a directory"
	RuleTooLong        = "is too long (at most 255 bytes a component and 4095 bytes in all)"
	RuleDotDotNew      = "must not use '..' after a directory that does not exist"
)

// Mode says what Resolve requires of the target.
type Mode int

const (
	// MustExist: the target must exist (read-file, edit-file, the roots
	// of glob and grep). A missing one is RuleFileNotExist.
	MustExist Mode = iota
	// Folder: the target must exist and be a folder (a command's working
	// folder). A missing one is RuleFolderNotExist, anything else
	// RuleNotFolder.
	Folder
	// MayBeMissing: the target, and folders above it, may be missing
	// (write-file). Resolved.Parent, ParentInfo and Missing describe
	// what does not exist yet.
	MayBeMissing
	// Loose: lenient resolution of a command's arguments, which need not
	// be paths at all. It never fails for lack of a target: the first
	// component that cannot be looked up (missing, below a file, too
	// long to exist) ends resolution and the rest is joined lexically.
	// A name that leaves the workspace (absolute, climbing above the
	// root, through an absolute or looping symlink) is not an error
	// either: Resolved.Outside is set and Rel is the cleaned name as
	// given. Only a NUL byte is an error (RuleNUL).
	Loose
)

// Options of Resolve.
type Options struct {
	Mode Mode
	// Pointer is the JSON pointer of the ArgErrors ("/path", "/cwd").
	Pointer string
	// Base is the workspace-relative folder a relative name starts from,
	// itself resolved (symlink-free, cleaned); "" or "." is the root.
	Base string
}

// Resolved is a name resolved inside the workspace.
type Resolved struct {
	// Rel is the cleaned, slash-separated, symlink-free workspace-relative
	// path of the target; "." is the workspace root. With Outside, it is
	// the cleaned name as given instead.
	Rel string
	// Info is the Lstat of Rel, the identity a tool compares against at
	// run time; nil when the target does not exist.
	Info fs.FileInfo
	// For a missing target (MayBeMissing): Parent is the deepest existing
	// ancestor (a folder, symlink-free), ParentInfo its identity, and
	// Missing the components below it that do not exist yet (the last is
	// the file name).
	Parent     string
	ParentInfo fs.FileInfo
	Missing    []string
	// Outside reports (Loose only) a name that leaves the workspace.
	Outside bool
}

// Resolve resolves name inside root the way the kernel would, one
// component at a time, expanding symlinks itself (root.Lstat,
// root.Readlink) so that the result names the real target. It is the one
// resolver of workspace paths: every tool and the jail builder use it.
//
// In every mode but Loose, an absolute name, a NUL byte, an absolute or
// empty symlink target, or anything that climbs above the root is
// RuleInside (RuleNUL for the byte); more than MaxSymlinkHops symlinks is
// RuleLoop; a file where a folder is needed RuleNotDirComp; a name or
// result over the length limits RuleTooLong. All are *tools.ArgError on
// o.Pointer. Other failures (I/O) are plain errors.
//
// A trailing slash, empty and "." components are ignored; "" is the root.
func Resolve(root *os.Root, name string, o Options) (Resolved, error) {
	r := resolver{root: root, o: o, name: name}
	return r.resolve()
}

type resolver struct {
	root *os.Root
	o    Options
	name string
}

func (r *resolver) loose() bool { return r.o.Mode == Loose }

func (r *resolver) argErr(rule string) error {
	return &tools.ArgError{Pointer: r.o.Pointer, Rule: rule}
}

// outside ends resolution of a name that leaves the workspace.
func (r *resolver) outside() (Resolved, error) {
	if r.loose() {
		return Resolved{Rel: path.Clean(r.name), Outside: true}, nil
	}
	return Resolved{}, r.argErr(RuleInside)
}

func (r *resolver) resolve() (Resolved, error) {
	if strings.IndexByte(r.name, 0) >= 0 {
		return Resolved{}, r.argErr(RuleNUL)
	}
	if IsAbs(r.name) {
		return r.outside()
	}
	if !r.loose() && TooLong(r.name) {
		return Resolved{}, r.argErr(RuleTooLong)
	}
	var stack []string // resolved, existing, symlink-free components
	if r.o.Base != "" && r.o.Base != "." {
		stack = strings.Split(r.o.Base, "/")
	}
	var top fs.FileInfo // Lstat of the last component of stack, if known
	todo := r.name
	hops := 0
	for todo != "" {
		var comp string
		comp, todo, _ = strings.Cut(todo, "/")
		switch comp {
		case "", ".":
			continue
		case "..":
			if len(stack) == 0 {
				return r.outside()
			}
			stack = stack[:len(stack)-1]
			top = nil
			continue
		}
		cand := joinRel(append(stack, comp))
		fi, err := r.root.Lstat(cand)
		if err != nil {
			if r.loose() {
				// Nothing below a component that cannot be looked up
				// exists; the rest is taken literally.
				return r.lexicalRest(stack, comp, todo)
			}
			switch {
			case errors.Is(err, fs.ErrNotExist):
				return r.missingTarget(stack, comp, todo)
			case errors.Is(err, syscall.ENAMETOOLONG):
				return Resolved{}, r.argErr(RuleTooLong)
			case errors.Is(err, syscall.ENOTDIR):
				return Resolved{}, r.argErr(RuleNotDirComp)
			}
			return Resolved{}, fmt.Errorf("wspath: lstat: %w", err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if hops++; hops > MaxSymlinkHops {
				if r.loose() {
					return r.outside()
				}
				return Resolved{}, r.argErr(RuleLoop)
			}
			target, err := r.root.Readlink(cand)
			if err != nil {
				if r.loose() {
					return r.outside()
				}
				return Resolved{}, fmt.Errorf("wspath: readlink: %w", err)
			}
			if target == "" || strings.IndexByte(target, 0) >= 0 || IsAbs(target) {
				return r.outside()
			}
			// The link's target is relative to the folder holding it,
			// which is exactly the current stack.
			if todo != "" {
				todo = target + "/" + todo
			} else {
				todo = target
			}
			continue
		}
		if !fi.IsDir() && !r.loose() && hasMoreComponents(todo) {
			return Resolved{}, r.argErr(RuleNotDirComp)
		}
		stack = append(stack, comp)
		top = fi
	}
	rel := joinRel(stack)
	if top == nil { // the base or root itself, or a climb back up into it
		fi, err := r.root.Lstat(rel)
		if err != nil {
			if r.loose() {
				return Resolved{Rel: rel}, nil
			}
			return Resolved{}, fmt.Errorf("wspath: lstat: %w", err)
		}
		top = fi
	}
	if !r.loose() {
		if len(rel) > MaxPath {
			return Resolved{}, r.argErr(RuleTooLong)
		}
		if r.o.Mode == Folder && !top.IsDir() {
			return Resolved{}, r.argErr(RuleNotFolder)
		}
	}
	return Resolved{Rel: rel, Info: top}, nil
}

// lexicalRest finishes Loose resolution once comp of the folder stack
// cannot be looked up: comp and the rest are joined lexically, ".."
// still climbing (past the root, the name is outside).
func (r *resolver) lexicalRest(stack []string, comp, todo string) (Resolved, error) {
	parts, _, escaped := lexical(stack, comp, todo)
	if escaped {
		return r.outside()
	}
	return Resolved{Rel: joinRel(parts)}, nil
}

// missingTarget finishes strict resolution once component comp of the
// existing folder stack does not exist: the rest is taken literally, since
// nothing below a missing folder can be a symlink yet.
func (r *resolver) missingTarget(stack []string, comp, todo string) (Resolved, error) {
	// Report an escape as such even though the kernel would stop at the
	// missing folder first.
	parts, sawDotDot, escaped := lexical(stack, comp, todo)
	if escaped {
		return r.outside()
	}
	switch r.o.Mode {
	case MustExist:
		return Resolved{}, r.argErr(RuleFileNotExist)
	case Folder:
		return Resolved{}, r.argErr(RuleFolderNotExist)
	}
	if sawDotDot {
		return Resolved{}, r.argErr(RuleDotDotNew)
	}
	parent := joinRel(stack)
	pi, err := r.root.Lstat(parent)
	if err != nil {
		return Resolved{}, fmt.Errorf("wspath: lstat parent: %w", err)
	}
	if !pi.IsDir() {
		return Resolved{}, r.argErr(RuleNotDirComp)
	}
	rel := joinRel(parts)
	if TooLong(rel) { // a symlink's target may name what the name did not
		return Resolved{}, r.argErr(RuleTooLong)
	}
	return Resolved{Rel: rel, Parent: parent, ParentInfo: pi, Missing: parts[len(stack):]}, nil
}

// lexical appends comp and the components of rest to a copy of stack
// without looking anything up: ".." pops, "" and "." are skipped. It
// reports whether rest held a "..", and whether one climbed above the root.
func lexical(stack []string, comp, rest string) (parts []string, sawDotDot, escaped bool) {
	parts = append(append([]string(nil), stack...), comp)
	for rest != "" {
		var c string
		c, rest, _ = strings.Cut(rest, "/")
		switch c {
		case "", ".":
		case "..":
			if len(parts) == 0 {
				return nil, true, true
			}
			sawDotDot = true
			parts = parts[:len(parts)-1]
		default:
			parts = append(parts, c)
		}
	}
	return parts, sawDotDot, false
}

// TooLong reports a name over the kernel's limits: longer than MaxPath
// bytes, or with a component longer than MaxComponent.
func TooLong(name string) bool {
	if len(name) > MaxPath {
		return true
	}
	for name != "" {
		var c string
		c, name, _ = strings.Cut(name, "/")
		if len(c) > MaxComponent {
			return true
		}
	}
	return false
}

// hasMoreComponents reports whether rest names anything beyond "." and
// empty components.
func hasMoreComponents(rest string) bool {
	for rest != "" {
		var c string
		c, rest, _ = strings.Cut(rest, "/")
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

// IsAbs reports a name that is absolute on any platform we might run on:
// a leading slash or backslash, or a Windows volume name.
func IsAbs(p string) bool {
	if strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) {
		return true
	}
	return len(p) >= 2 && p[1] == ':' && ((p[0] >= 'a' && p[0] <= 'z') || (p[0] >= 'A' && p[0] <= 'Z'))
}

// SameIdentity reports whether two FileInfos describe the same file
// (device and inode) of the same type.
func SameIdentity(a, b fs.FileInfo) bool {
	if a == nil || b == nil {
		return false
	}
	return a.Mode().Type() == b.Mode().Type() && os.SameFile(a, b)
}

// HostRel returns the workspace-relative, slash-separated form of the host
// path p, or false when p lies outside the workspace folder dir. It is
// lexical; Resolve then handles symlinks.
func HostRel(dir, p string) (string, bool) {
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return "", false
	}
	rel = filepath.ToSlash(rel)
	if rel == ".." || strings.HasPrefix(rel, "../") || IsAbs(rel) {
		return "", false
	}
	return rel, true
}
