package command

import (
	"regexp"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/pattern"
	"mvdan.cc/sh/v3/syntax"
)

// maxBraceAlternatives bounds the matchers one brace word may expand to;
// a word beyond it is treated as dynamic (never matches).
const maxBraceAlternatives = 256

// wordMatcher matches what the interpreter makes of one approved word.
type wordMatcher struct {
	never bool           // a dynamic word: matches nothing
	lit   string         // the word's value when nothing is globbed
	glob  *regexp.Regexp // set for a glob word: matches one or more fields
}

// argvMatcher matches a whole executed argv against one approved segment.
type argvMatcher []wordMatcher

// Approved is every argv the policy decision covers.
type Approved []argvMatcher

// NewApproved compiles the segments' words into matchers. home is the
// HOME the command runs with, for ~.
func NewApproved(words [][]*syntax.Word, home string) Approved {
	cfg := &expand.Config{Env: expand.ListEnviron("HOME=" + home)}
	set := make(Approved, 0, len(words))
	for _, ws := range words {
		var m argvMatcher
		for _, w := range ws {
			m = append(m, wordMatchers(cfg, w)...)
		}
		set = append(set, m)
		// exec and command run their operands as a program: an approved
		// "exec prog args" approves "prog args" as the program it runs.
		if len(m) > 1 && !m[0].never && m[0].glob == nil && (m[0].lit == "exec" || m[0].lit == "command") &&
			!m[1].never && m[1].glob == nil && len(m[1].lit) > 0 && m[1].lit[0] != '-' {
			set = append(set, m[1:])
		}
	}
	return set
}

// wordMatchers returns the matchers of one word: one, or one per brace
// alternative.
func wordMatchers(cfg *expand.Config, w *syntax.Word) []wordMatcher {
	if isDynamic(w) {
		return []wordMatcher{{never: true}}
	}
	alts := []*syntax.Word{w}
	cp := *w
	if syntax.SplitBraces(&cp) {
		alts = alts[:0]
		for alt, err := range expand.BracesSeq(cfg, &cp) {
			if err != nil || len(alts) == maxBraceAlternatives {
				return []wordMatcher{{never: true}}
			}
			alts = append(alts, alt)
		}
	}
	out := make([]wordMatcher, 0, len(alts))
	for _, alt := range alts {
		out = append(out, altMatcher(cfg, alt))
	}
	return out
}

// altMatcher is the matcher of a word without brace expansions.
func altMatcher(cfg *expand.Config, w *syntax.Word) wordMatcher {
	fields, err := expand.Fields(cfg, w) // no ReadDir: nothing is globbed
	if err != nil || len(fields) != 1 {
		return wordMatcher{never: true}
	}
	m := wordMatcher{lit: fields[0]}
	pat, err := expand.Pattern(cfg, w)
	if err != nil {
		return wordMatcher{never: true}
	}
	if pattern.HasMeta(pat, 0) {
		expr, err := pattern.Regexp(pat, pattern.Filenames|pattern.EntireString)
		if err != nil {
			return m // an invalid pattern is not globbed: the literal only
		}
		re, err := regexp.Compile(expr)
		if err != nil {
			return m
		}
		m.glob = re
	}
	return m
}

// isDynamic reports a word whose value depends on run time state other
// than the file system: parameters, substitutions, arithmetic.
func isDynamic(w *syntax.Word) bool {
	dynamic := false
	syntax.Walk(w, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.ParamExp, *syntax.CmdSubst, *syntax.ProcSubst, *syntax.ArithmExp, *syntax.ExtGlob:
			dynamic = true
		case *syntax.DblQuoted:
			dynamic = dynamic || n.Dollar
		}
		return !dynamic
	})
	return dynamic
}

// Match reports whether argv is one of the approved argvs.
func (s Approved) Match(argv []string) bool {
	for _, m := range s {
		if m.match(argv) {
			return true
		}
	}
	return false
}

// match aligns argv with the word matchers: a literal word takes exactly
// one field, a glob word one or more fields matching its pattern (or its
// unexpanded text, as when nothing matched), a dynamic word none.
func (m argvMatcher) match(argv []string) bool {
	n := len(argv)
	// ok[j] after processing matcher i: m[i:] matches argv[j:].
	next := make([]bool, n+1)
	next[n] = true
	cur := make([]bool, n+1)
	for i := len(m) - 1; i >= 0; i-- {
		w := m[i]
		for j := 0; j <= n; j++ {
			cur[j] = false
			if w.never || j == n {
				continue
			}
			if argv[j] == w.lit && next[j+1] {
				cur[j] = true
				continue
			}
			if w.glob == nil {
				continue
			}
			for k := j; k < n && w.glob.MatchString(argv[k]); k++ {
				if next[k+1] {
					cur[j] = true
					break
				}
			}
		}
		next, cur = cur, next
	}
	return next[0]
}
