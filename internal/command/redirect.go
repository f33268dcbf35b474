package command

import (
	"errors"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// Redirect is a redirection that opens a file: its target as the
// interpreter will open it, and how.
type Redirect struct {
	// Word is the target as the command wrote it.
	Word string
	// Path is the target after quote removal and tilde expansion (with
	// the HOME the command runs with): the name the interpreter opens,
	// relative to its working folder at that point.
	Path string
	// Read and Write say how the file is opened; Append marks >> and &>>.
	Read, Write, Append bool
}

// ErrDynamicRedirect is returned by Redirects for a redirect whose target
// depends on run time state ($VAR, $(…), arithmetic, ~user): no path can
// be decided on, so no such command runs.
var ErrDynamicRedirect = errors.New("a redirect target must be a literal path")

// Redirects returns every redirection of f that opens a file, in source
// order: <, >, >>, &>, &>>, >| and <>. Descriptor duplications (2>&1, <&-),
// here-documents and here-strings open nothing and are not listed, nor is
// a target that is a process substitution (< <(cmd): a pipe the
// interpreter makes itself). home expands ~.
func Redirects(f *syntax.File, src, home string) ([]Redirect, error) {
	var out []Redirect
	var err error
	syntax.Walk(f, func(n syntax.Node) bool {
		rd, ok := n.(*syntax.Redirect)
		if !ok || err != nil {
			return err == nil
		}
		var r Redirect
		switch rd.Op {
		case syntax.RdrIn:
			r.Read = true
		case syntax.RdrOut, syntax.RdrAll, syntax.ClbOut:
			r.Write = true
		case syntax.AppOut, syntax.AppAll:
			r.Write, r.Append = true, true
		case syntax.RdrInOut:
			r.Read, r.Write = true, true
		default: // dups, here-documents, here-strings
			return true
		}
		if rd.Word == nil {
			return true
		}
		if len(rd.Word.Parts) == 1 {
			if _, ps := rd.Word.Parts[0].(*syntax.ProcSubst); ps {
				return true
			}
		}
		r.Word = wordSource(rd.Word, src)
		p, ok := redirectPath(rd.Word, home)
		if !ok {
			err = ErrDynamicRedirect
			return false
		}
		r.Path = p
		out = append(out, r)
		return true
	})
	return out, err
}

// redirectPath is the value of a redirect target the way the interpreter
// computes it (expand.Literal: quote removal, tilde expansion, no
// globbing), for targets whose value does not depend on run time state.
func redirectPath(w *syntax.Word, home string) (string, bool) {
	for i, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			if i == 0 && strings.HasPrefix(p.Value, "~") {
				// Only the caller's own ~ (HOME): ~user and ~+ depend on
				// the system or the shell's state.
				name, _, _ := strings.Cut(p.Value[1:], "/")
				if name != "" {
					return "", false
				}
			}
		case *syntax.SglQuoted:
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", false
			}
			for _, q := range p.Parts {
				if _, ok := q.(*syntax.Lit); !ok {
					return "", false
				}
			}
		default:
			return "", false
		}
	}
	cfg := &expand.Config{Env: expand.ListEnviron("HOME=" + home)}
	v, err := expand.Literal(cfg, w)
	if err != nil || v == "" {
		return "", false
	}
	return v, true
}
