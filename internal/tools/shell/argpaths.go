package shell

import (
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"

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

// argumentFiles turns the literal arguments of a command into file
// resources, so that path rules written for the file tools (protected
// paths, read and write globs) also see `cat secrets/db.env` and
// `sort -osecrets/db.env`. argumentUses (writers.go) says which words of
// each simple command are paths — operands, option values, attached ones
// included — and which the program writes (access "write"); every other
// path is access "command". Each is read relative to the working folder
// and to every folder a `cd` segment of the same command names (an
// over-approximation: more resources only make policy stricter). Existing
// components are resolved through symlinks like the file tools do; a path
// that leaves the workspace is reported with "outside": true, and an
// existing regular file with more than one hard link carries "links".
//
// A command naming more than maxArgPaths distinct paths is an ArgError:
// the scan never drops a path.
//
// This is defence in depth, not confinement: a program can still open
// paths it computes at run time. The OS jail bounds what it can reach.
func argumentFiles(root *os.Root, cwd string, segments [][]string) ([]tools.Resource, error) {
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
	seen := map[string]bool{}
	var out []tools.Resource
	add := func(p, access string, inside bool, fi fs.FileInfo) bool {
		key := access + "\x00" + p
		if !inside {
			key = "\x00" + key
		}
		if seen[key] {
			return true
		}
		if len(out) == maxArgPaths {
			return false
		}
		seen[key] = true
		r := tools.Resource{"type": "file", "path": p, "access": access}
		if !inside {
			r["outside"] = true
		}
		out = append(out, wspath.AddLinks(r, fi))
		return true
	}
	for _, seg := range segments {
		for _, u := range argumentUses(seg) {
			if u.word == "" {
				continue
			}
			for _, b := range bases {
				r, err := resolveLoose(root, b, u.word)
				if err != nil { // a NUL byte: no program can be given it
					break
				}
				if !add(r.Rel, u.access, !r.Outside, r.Info) {
					return nil, &tools.ArgError{Pointer: "/command", Rule: ruleTooManyPaths}
				}
				if r.Outside && wspath.IsAbs(u.word) {
					break // the same path from every base
				}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		pi, pj := out[i]["path"].(string), out[j]["path"].(string)
		if pi != pj {
			return pi < pj
		}
		return out[i]["access"].(string) < out[j]["access"].(string)
	})
	return out, nil
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
