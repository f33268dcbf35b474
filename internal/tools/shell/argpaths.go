package shell

import (
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/toolgate/toolgate/internal/tools"
)

// maxArgPaths bounds the file resources one command yields.
const maxArgPaths = 64

// argumentFiles turns the literal arguments of a command into file
// resources, so that path rules written for the file tools (protected
// paths, read globs) also see `cat secrets/db.env`. Every argument after
// argv[0] that is not an option — and the value of an --option=value — is
// read as a path relative to the working folder and to every folder a
// `cd` segment of the same command names (an over-approximation: more
// resources only make policy stricter). Existing components are resolved
// through symlinks like the file tools do; a path that leaves the
// workspace is reported with "outside": true.
//
// This is defence in depth, not confinement: a program can still open
// paths it computes at run time. OS confinement bounds writes; reads
// inside the workspace are only as narrow as the commands policy allows.
func argumentFiles(root *os.Root, cwd string, segments [][]string) []tools.Resource {
	bases := []string{cwd}
	for _, seg := range segments {
		if len(seg) == 2 && seg[0] == "cd" && !strings.HasPrefix(seg[1], "-") {
			for _, b := range bases {
				if p, inside := resolveLoose(root, b, seg[1]); inside {
					bases = append(bases, p)
				}
			}
		}
	}
	seen := map[string]bool{}
	var out []tools.Resource
	add := func(p string, inside bool) {
		key := p
		if !inside {
			key = "\x00" + p
		}
		if seen[key] || len(out) >= maxArgPaths {
			return
		}
		seen[key] = true
		r := tools.Resource{"type": "file", "path": p, "access": "command"}
		if !inside {
			r["outside"] = true
		}
		out = append(out, r)
	}
	for _, seg := range segments {
		for _, tok := range seg[1:] {
			if strings.HasPrefix(tok, "-") {
				_, v, ok := strings.Cut(tok, "=")
				if !ok {
					continue
				}
				tok = v
			}
			if tok == "" || strings.IndexByte(tok, 0) >= 0 {
				continue
			}
			if isAbs(tok) {
				add(path.Clean(tok), false)
				continue
			}
			for _, b := range bases {
				p, inside := resolveLoose(root, b, tok)
				add(p, inside)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i]["path"].(string) < out[j]["path"].(string) })
	return out
}

// resolveLoose resolves name against the workspace-relative folder base:
// symlinks of existing components are expanded, the first missing
// component ends resolution (the rest is joined lexically). It reports
// whether the result stays inside the workspace; outside paths are
// returned as the cleaned name the command gave.
func resolveLoose(root *os.Root, base, name string) (string, bool) {
	var stack []string
	if base != "." {
		stack = strings.Split(base, "/")
	}
	todo := name
	hops := 0
	missing := false
	for todo != "" {
		var comp string
		comp, todo, _ = strings.Cut(todo, "/")
		switch comp {
		case "", ".":
			continue
		case "..":
			if len(stack) == 0 {
				return path.Clean(name), false
			}
			stack = stack[:len(stack)-1]
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
			continue
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			hops++
			target, err := root.Readlink(cand)
			if err != nil || hops > maxSymlinkHops || target == "" || isAbs(target) {
				return path.Clean(name), false
			}
			todo = strings.TrimSuffix(target+"/"+todo, "/")
			continue
		}
		stack = append(stack, comp)
	}
	return joinRel(stack), true
}
