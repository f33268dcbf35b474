package shell

import (
	"io/fs"
	"os"
	"path"
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
				if p, inside, _ := resolveLoose(root, b, seg[1]); inside {
					bases = append(bases, p)
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
			tok := u.word
			if tok == "" || strings.IndexByte(tok, 0) >= 0 {
				continue
			}
			if isAbs(tok) {
				if !add(path.Clean(tok), u.access, false, nil) {
					return nil, &tools.ArgError{Pointer: "/command", Rule: ruleTooManyPaths}
				}
				continue
			}
			for _, b := range bases {
				p, inside, fi := resolveLoose(root, b, tok)
				if !add(p, u.access, inside, fi) {
					return nil, &tools.ArgError{Pointer: "/command", Rule: ruleTooManyPaths}
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

// resolveLoose resolves name against the workspace-relative folder base:
// symlinks of existing components are expanded, the first missing
// component ends resolution (the rest is joined lexically). It reports
// whether the result stays inside the workspace; outside paths are
// returned as the cleaned name the command gave. fi is the Lstat of the
// result when it exists.
func resolveLoose(root *os.Root, base, name string) (string, bool, fs.FileInfo) {
	var stack []string
	if base != "." {
		stack = strings.Split(base, "/")
	}
	todo := name
	hops := 0
	missing := false
	var last fs.FileInfo // Lstat of the last component of stack, when known
	for todo != "" {
		var comp string
		comp, todo, _ = strings.Cut(todo, "/")
		switch comp {
		case "", ".":
			continue
		case "..":
			if len(stack) == 0 {
				return path.Clean(name), false, nil
			}
			stack = stack[:len(stack)-1]
			last = nil
			continue
		}
		if missing {
			stack = append(stack, comp)
			continue
		}
		cand := joinRel(append(stack, comp))
		fi, err := root.Lstat(cand)
		if err != nil {
			missing = true // nothing below a missing component exists
			stack = append(stack, comp)
			last = nil
			continue
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			hops++
			target, err := root.Readlink(cand)
			if err != nil || hops > maxSymlinkHops || target == "" || isAbs(target) {
				return path.Clean(name), false, nil
			}
			todo = strings.TrimSuffix(target+"/"+todo, "/")
			continue
		}
		stack = append(stack, comp)
		last = fi
	}
	if missing {
		return joinRel(stack), true, nil
	}
	if last == nil { // the base itself, or a climb back up into it
		last, _ = root.Lstat(joinRel(stack))
	}
	return joinRel(stack), true, last
}
