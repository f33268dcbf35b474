package workspace

import (
	"fmt"
	"strings"

	"github.com/gobwas/glob"
)

// excluder matches workspace-relative paths against Limits.ExcludePaths.
// The patterns are compiled exactly as OPA's glob.match compiles them with
// ["/"] as delimiters (no globstar), so that an exclusion means here what it
// means in policy.
type excluder struct{ pats []*glob.Pattern }

// newExcluder compiles the exclusion patterns. A pattern that does not
// compile is an error: the call must not run with a hole in its exclusions.
func newExcluder(patterns []string) (*excluder, error) {
	e := &excluder{pats: make([]*glob.Pattern, 0, len(patterns))}
	for i, p := range patterns {
		g, err := glob.Compile(p, '/')
		if err != nil {
			return nil, fmt.Errorf("workspace: exclude pattern %d: %w", i, err)
		}
		e.pats = append(e.pats, g)
	}
	return e, nil
}

// match reports whether rel itself is excluded.
func (e *excluder) match(rel string) bool {
	for _, p := range e.pats {
		if p.Match(rel) {
			return true
		}
	}
	return false
}

// covers reports whether rel or any of its ancestor directories is
// excluded: a walk never enters an excluded directory, so nothing below one
// may be touched directly either.
func (e *excluder) covers(rel string) bool {
	if len(e.pats) == 0 {
		return false
	}
	if rel == "." {
		return e.match(".")
	}
	for i := 0; i < len(rel); i++ {
		if rel[i] == '/' && e.match(rel[:i]) {
			return true
		}
	}
	return e.match(rel)
}

// joinWS joins a workspace-relative directory and a relative name.
func joinWS(dir, name string) string {
	if dir == "." || dir == "" {
		return name
	}
	if name == "." || name == "" {
		return dir
	}
	return dir + "/" + name
}

// hasSlash reports whether a glob pattern addresses paths rather than names.
func hasSlash(p string) bool { return strings.Contains(p, "/") }
