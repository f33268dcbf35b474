package shell

import (
	"io/fs"
	"os"
	"slices"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
)

// pinnedProgram is a program of an approved segment, resolved when the
// call was prepared. Only pinned programs run: at run time the name must
// resolve to the same path and the file must be the same one (device and
// inode), and the jail lets nothing else execute.
type pinnedProgram struct {
	path string
	info fs.FileInfo
}

// runsOperand are builtins that run their first operand as a program.
var runsOperand = map[string]bool{"exec": true, "command": true}

// pinPrograms resolves the program of every segment the way exec will: a
// bare name through pathEnv, a name with a slash against dir (the host
// working folder). Names that do not resolve are left out: they cannot
// run.
func pinPrograms(segments [][]string, dir, pathEnv string) map[string]pinnedProgram {
	out := map[string]pinnedProgram{}
	env := expand.ListEnviron("PATH=" + pathEnv)
	pin := func(name string) {
		if _, done := out[name]; done || name == "" || strings.HasPrefix(name, "-") {
			return
		}
		p, err := interp.LookPathDir(dir, env, name)
		if err != nil {
			return
		}
		fi, err := os.Stat(p)
		if err != nil {
			return
		}
		out[name] = pinnedProgram{path: p, info: fi}
	}
	for _, seg := range segments {
		if len(seg) == 0 {
			continue
		}
		pin(seg[0])
		if runsOperand[seg[0]] && len(seg) > 1 {
			pin(seg[1])
		}
	}
	return out
}

// programPaths lists the pinned programs' paths, sorted and unique.
func programPaths(pinned map[string]pinnedProgram) []string {
	out := make([]string, 0, len(pinned))
	for _, p := range pinned {
		out = append(out, p.path)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// pinnedPath returns the path to execute for name resolved (at run time) to
// resolved, or false when it is not the program that was decided.
func pinnedPath(pinned map[string]pinnedProgram, name, resolved string) (string, bool) {
	p, ok := pinned[name]
	if !ok || p.path != resolved {
		return "", false
	}
	fi, err := os.Stat(resolved)
	if err != nil || !os.SameFile(fi, p.info) {
		return "", false
	}
	return resolved, true
}
