package command

import (
	"os"
	"slices"
	"strings"
	"syscall"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
)

// Pin is a program of an approved segment, resolved when the call was
// prepared: its absolute path and its identity (device and inode). Only
// pinned programs run: at run time the name must resolve to the same path
// and the file there must be the same one, and the jail lets nothing else
// execute.
type Pin struct {
	Path string `json:"path"`
	Dev  uint64 `json:"dev"`
	Ino  uint64 `json:"ino"`
}

// Pins maps the program names of the segments (as written) to their pins.
type Pins map[string]Pin

// runsOperand are builtins that run their first operand as a program.
var runsOperand = map[string]bool{"exec": true, "command": true}

// PinPrograms resolves the program of every segment the way the
// interpreter will: a bare name through pathEnv, a name with a slash
// against dir (the working folder). Names that do not resolve are left
// out: they cannot run.
func PinPrograms(segments [][]string, dir, pathEnv string) Pins {
	out := Pins{}
	env := expand.ListEnviron("PATH=" + pathEnv)
	pin := func(name string) {
		if _, done := out[name]; done || name == "" || strings.HasPrefix(name, "-") {
			return
		}
		p, err := interp.LookPathDir(dir, env, name)
		if err != nil {
			return
		}
		if id, ok := identity(p); ok {
			id.Path = p
			out[name] = id
		}
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

// Paths lists the pinned programs' paths, sorted and unique.
func (p Pins) Paths() []string {
	out := make([]string, 0, len(p))
	for _, x := range p {
		out = append(out, x.Path)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Check returns the path to execute for name, which resolved (at run time)
// to resolved, or false when it is not the program that was decided.
func (p Pins) Check(name, resolved string) (string, bool) {
	x, ok := p[name]
	if !ok || x.Path != resolved {
		return "", false
	}
	id, ok := identity(resolved)
	if !ok || id.Dev != x.Dev || id.Ino != x.Ino {
		return "", false
	}
	return resolved, true
}

// identity stats p (following symlinks, as exec does).
func identity(p string) (Pin, bool) {
	fi, err := os.Stat(p)
	if err != nil {
		return Pin{}, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return Pin{}, false
	}
	return Pin{Dev: uint64(st.Dev), Ino: uint64(st.Ino)}, true
}
