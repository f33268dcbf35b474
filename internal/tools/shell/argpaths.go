package shell

import (
	"fmt"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/command"
	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/wspath"
)

// maxArgPaths bounds the file resources one command yields. A command
// that names more is refused at prepare (never cut short: a path past the
// cap would reach the program unjudged).
const maxArgPaths = 64

// ruleTooManyPaths is the ArgError rule of a command over the cap.
var ruleTooManyPaths = "names more than " + strconv.Itoa(maxArgPaths) +
	" paths (arguments, option values and cd folders count); split it into several commands"

// ruleDynamicRedirect is the ArgError rule of a redirection whose target
// is not a literal path.
const ruleDynamicRedirect = "a redirect target must be a literal path (not $VAR, $(…), arithmetic or ~user)"

// scan turns what a command names into file resources. bases are the
// workspace-relative folders its words are read against: the working
// folder and every folder a `cd` segment names from one of them (an
// over-approximation: more resources only make policy stricter). mountAt
// is where the command sees the workspace: an absolute name below it is a
// workspace path.
type scan struct {
	root    *os.Root
	mountAt string
	bases   []string
}

// commandBases returns the working folder cwd and the folders the cd
// segments of the command lead to from it.
func commandBases(root *os.Root, cwd string, segments [][]string) []string {
	bases := []string{cwd}
	for _, seg := range segments {
		if len(seg) == 2 && seg[0] == "cd" && !strings.HasPrefix(seg[1], "-") {
			for _, b := range bases {
				if r, err := resolveLoose(root, b, seg[1]); err == nil && !r.Outside {
					bases = append(bases, r.Rel)
				}
			}
		}
	}
	return bases
}

// fileSet collects file resources without duplicates, at most maxArgPaths.
type fileSet struct {
	seen map[string]bool
	out  []tools.Resource
}

// add records r; false when the cap is reached.
func (fs *fileSet) add(r tools.Resource) bool {
	key := fmt.Sprint(r["path"], "\x00", r["access"], "\x00", r["outside"], "\x00", r["redirect"], "\x00", r["mode"])
	if fs.seen == nil {
		fs.seen = map[string]bool{}
	}
	if fs.seen[key] {
		return true
	}
	if len(fs.out) == maxArgPaths {
		return false
	}
	fs.seen[key] = true
	fs.out = append(fs.out, r)
	return true
}

// resolve resolves a word of the command against base: a name below the
// workspace's mount point is the workspace path it names.
func (sc scan) resolve(base, word string) (wspath.Resolved, error) {
	if word == sc.mountAt {
		word, base = ".", "."
	} else if rel, ok := strings.CutPrefix(word, sc.mountAt+"/"); ok {
		word, base = rel, "."
	}
	return resolveLoose(sc.root, base, word)
}

// argumentFiles turns the literal arguments of a command into file
// resources, so that path rules written for the file tools (protected
// paths, read and write globs) also see `cat secrets/db.env` and
// `sort -osecrets/db.env`. argumentUses (writers.go) says which words of
// each simple command are paths — operands, option values, attached ones
// included — and which the program writes (access "write"); every other
// path is access "command". Each is read against every base. Existing
// components are resolved through symlinks like the file tools do; a path
// that leaves the workspace is reported with "outside": true, and an
// existing regular file with more than one hard link carries "links".
//
// A command naming more than maxArgPaths distinct paths is an ArgError:
// the scan never drops a path.
//
// This is defence in depth, not confinement: a program can still open
// paths it computes at run time. The jail bounds what it can reach.
func (sc scan) argumentFiles(segments [][]string) ([]tools.Resource, error) {
	var set fileSet
	for _, seg := range segments {
		for _, u := range argumentUses(seg) {
			if u.word == "" {
				continue
			}
			for _, b := range sc.bases {
				r, err := sc.resolve(b, u.word)
				if err != nil { // a NUL byte: no program can be given it
					break
				}
				res := tools.Resource{"type": "file", "path": r.Rel, "access": u.access}
				if r.Outside {
					res["outside"] = true
				}
				if !set.add(wspath.AddLinks(res, r.Info)) {
					return nil, &tools.ArgError{Pointer: "/command", Rule: ruleTooManyPaths}
				}
				if r.Outside && wspath.IsAbs(u.word) {
					break // the same path from every base
				}
			}
		}
	}
	return set.out, nil
}

// redirectFiles turns the file redirections of a command into file
// resources judged like the file tools' targets: `< f` reads f (access
// "read"), `> f` and `&> f` write it ("write"), `>> f` appends to it
// ("write" with "mode": "append"), `<>` both; each carries "redirect":
// true. /dev/null is no workspace file and needs no resource. A target
// that exists and is not a regular file (a FIFO, a device, a folder) is
// refused here, before it can block anything.
func (sc scan) redirectFiles(rds []command.Redirect) ([]tools.Resource, error) {
	var set fileSet
	for _, rd := range rds {
		if rd.Path == os.DevNull {
			continue
		}
		for _, b := range sc.bases {
			r, err := sc.resolve(b, rd.Path)
			if err != nil {
				return nil, &tools.ArgError{Pointer: "/command", Rule: "a redirect target is not a valid path"}
			}
			if r.Info != nil && !r.Info.Mode().IsRegular() {
				return nil, &tools.ArgError{Pointer: "/command", Rule: "redirect target " + capWord(rd.Word) + " is not a regular file"}
			}
			for _, access := range redirectAccess(rd) {
				res := tools.Resource{"type": "file", "path": r.Rel, "access": access, "redirect": true}
				if access == accessWrite && rd.Append {
					res["mode"] = "append"
				}
				if r.Outside {
					res["outside"] = true
				}
				if !set.add(wspath.AddLinks(res, r.Info)) {
					return nil, &tools.ArgError{Pointer: "/command", Rule: ruleTooManyPaths}
				}
			}
			if r.Outside && wspath.IsAbs(rd.Path) {
				break
			}
		}
	}
	return set.out, nil
}

// redirectAccess is how policy sees a redirection's target.
func redirectAccess(rd command.Redirect) []string {
	var out []string
	if rd.Read {
		out = append(out, accessRead)
	}
	if rd.Write {
		out = append(out, accessWrite)
	}
	return out
}

// capWord shortens a word for an error message.
func capWord(w string) string {
	if len(w) > 80 {
		return w[:80] + "…"
	}
	return w
}

// mergeFiles joins argument and redirect resources, sorted by path then
// access, refusing more than maxArgPaths in all.
func mergeFiles(a, b []tools.Resource) ([]tools.Resource, error) {
	var set fileSet
	for _, r := range append(a, b...) {
		if !set.add(r) {
			return nil, &tools.ArgError{Pointer: "/command", Rule: ruleTooManyPaths}
		}
	}
	out := set.out
	sort.SliceStable(out, func(i, j int) bool {
		pi, pj := out[i]["path"].(string), out[j]["path"].(string)
		if pi != pj {
			return pi < pj
		}
		return out[i]["access"].(string) < out[j]["access"].(string)
	})
	return out, nil
}

// redirectNames are the names (absolute, as the interpreter will join and
// clean them) a redirection of the command may open: each target from
// the working folder dir and from every folder a cd segment leads to
// (lexically, as the interpreter's cd does), and /dev/null. The
// interpreter in the jail opens nothing else.
func redirectNames(rds []command.Redirect, dir string, segments [][]string) []string {
	dirs := []string{dir}
	for _, seg := range segments {
		if len(seg) == 2 && seg[0] == "cd" && !strings.HasPrefix(seg[1], "-") {
			for _, d := range dirs {
				if len(dirs) >= maxArgPaths {
					break
				}
				if path.IsAbs(seg[1]) {
					dirs = append(dirs, path.Clean(seg[1]))
				} else {
					dirs = append(dirs, path.Join(d, seg[1]))
				}
			}
		}
	}
	// source and . read their operand through the same handler: an
	// approved `source FILE` may open FILE.
	for _, seg := range segments {
		if len(seg) >= 2 && (seg[0] == "source" || seg[0] == ".") {
			rds = append(rds, command.Redirect{Path: seg[1], Read: true})
		}
	}
	var out []string
	for _, rd := range rds {
		if path.IsAbs(rd.Path) {
			out = append(out, path.Clean(rd.Path))
			continue
		}
		for _, d := range dirs {
			out = append(out, path.Join(d, rd.Path))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// resolveLoose resolves name against the workspace-relative folder base
// with the one resolver of workspace paths in its Loose mode: symlinks of
// existing components are expanded, the first component that cannot be
// looked up ends resolution (the rest is joined lexically), and a name
// that leaves the workspace is reported Outside as the cleaned name the
// command gave. A name too long to be a path (wspath.TooLong) is not
// refused here: arguments are often not paths at all (a commit message, a
// sed script), and no program can open it; it is reported like a missing
// path.
func resolveLoose(root *os.Root, base, name string) (wspath.Resolved, error) {
	return wspath.Resolve(root, name, wspath.Options{Mode: wspath.Loose, Base: base, Pointer: "/command"})
}
