package command

import (
	"slices"
	"strings"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/pattern"
	"mvdan.cc/sh/v3/syntax"
)

// Construct names, as the policy pack knows them (CONTRACT §5).
const (
	cRedirect   = "redirect"
	cCmdSubst   = "command_substitution"
	cProcSubst  = "process_substitution"
	cParamExp   = "parameter_expansion"
	cArithmetic = "arithmetic"
	cSubshell   = "subshell"
	cBlock      = "block"
	cBackground = "background"
	cAssignment = "assignment"
	cHeredoc    = "heredoc"
	cFunction   = "function"
	cGlob       = "glob"
	cTilde      = "tilde"
	cBraceExp   = "brace_expansion"
	cIf         = "if"
	cLoop       = "loop"
	cCase       = "case"
	cTest       = "test"
	cCoproc     = "coproc"
	cOther      = "other"
)

// Analysis is what the gateway learns about a parsed command, and what
// the interpreter in the jail learns again from its own parse.
type Analysis struct {
	// Segments are the argv of every simple command: what policy sees.
	Segments [][]string
	// Words are the syntax words of each segment, for matching what runs.
	Words [][]*syntax.Word
	// Plain is true only for a chain of literal calls.
	Plain bool
	// Constructs name what made the command not plain: sorted, unique.
	Constructs []string
}

// Parse parses src as Bash.
func Parse(src string) (*syntax.File, error) {
	return syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
}

// Analyze derives segments, plainness and constructs from f, whose source
// text is src.
func Analyze(f *syntax.File, src string) Analysis {
	found := map[string]bool{}
	// A here-document body is not a shell word: "*" in it is text, not a
	// glob. Its expansions ($x, $(…)) are still found below it.
	bodies := map[*syntax.Word]bool{}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Redirect:
			if n.Hdoc != nil {
				bodies[n.Hdoc] = true
			}
		case *syntax.Word:
			if bodies[n] {
				return true
			}
		}
		for _, c := range constructsOf(n) {
			found[c] = true
		}
		return true
	})
	a := Analysis{Plain: len(found) == 0}
	if a.Plain {
		// Every statement is a chain of literal calls: the segments are
		// their argv in order, nothing else can run.
		for _, st := range f.Stmts {
			if !a.collectPlain(st) {
				// A node this analysis does not know: never call it plain.
				a.Plain = false
				found[cOther] = true
			}
		}
		if a.Plain {
			return a
		}
		a.Segments, a.Words = nil, nil
	}
	for c := range found {
		a.Constructs = append(a.Constructs, c)
	}
	slices.Sort(a.Constructs)
	// Every simple command anywhere in the program, in source order, with
	// non-literal words as their source text.
	syntax.Walk(f, func(n syntax.Node) bool {
		if ce, ok := n.(*syntax.CallExpr); ok && len(ce.Args) > 0 {
			seg := make([]string, len(ce.Args))
			for i, w := range ce.Args {
				if v, ok := literalWord(w); ok {
					seg[i] = v
				} else {
					seg[i] = wordSource(w, src)
				}
			}
			a.Segments = append(a.Segments, seg)
			a.Words = append(a.Words, ce.Args)
		}
		return true
	})
	return a
}

// collectPlain appends the argv of each call of a plain statement and
// reports whether the statement really is a chain of literal calls.
func (a *Analysis) collectPlain(st *syntax.Stmt) bool {
	switch c := st.Cmd.(type) {
	case *syntax.CallExpr:
		if len(c.Args) == 0 {
			return false
		}
		seg := make([]string, len(c.Args))
		for i, w := range c.Args {
			v, ok := literalWord(w)
			if !ok {
				return false
			}
			seg[i] = v
		}
		a.Segments = append(a.Segments, seg)
		a.Words = append(a.Words, c.Args)
		return true
	case *syntax.BinaryCmd:
		return a.collectPlain(c.X) && a.collectPlain(c.Y)
	}
	return false
}

// constructsOf names what node n adds beyond a chain of literal calls.
func constructsOf(n syntax.Node) []string {
	switch n := n.(type) {
	case *syntax.Stmt:
		var cs []string
		if n.Background || n.Disown {
			cs = append(cs, cBackground)
		}
		if n.Coprocess {
			cs = append(cs, cCoproc)
		}
		if n.Negated {
			cs = append(cs, cOther)
		}
		if n.Cmd == nil && len(n.Redirs) == 0 {
			cs = append(cs, cOther)
		}
		return cs
	case *syntax.Redirect:
		switch n.Op {
		case syntax.Hdoc, syntax.DashHdoc, syntax.WordHdoc:
			return []string{cHeredoc}
		}
		return []string{cRedirect}
	case *syntax.CallExpr:
		if len(n.Assigns) > 0 {
			return []string{cAssignment}
		}
	case *syntax.BinaryCmd:
		switch n.Op {
		case syntax.AndStmt, syntax.OrStmt, syntax.Pipe:
		case syntax.PipeAll: // |& is 2>&1 |
			return []string{cRedirect}
		default:
			return []string{cOther}
		}
	case *syntax.Word:
		return wordConstructs(n)
	case *syntax.CmdSubst:
		return []string{cCmdSubst}
	case *syntax.ProcSubst:
		return []string{cProcSubst}
	case *syntax.ParamExp:
		return []string{cParamExp}
	case *syntax.ArithmExp, *syntax.ArithmCmd, *syntax.LetClause:
		return []string{cArithmetic}
	case *syntax.Subshell:
		return []string{cSubshell}
	case *syntax.Block:
		return []string{cBlock}
	case *syntax.DeclClause, *syntax.Assign:
		return []string{cAssignment}
	case *syntax.FuncDecl:
		return []string{cFunction}
	case *syntax.IfClause:
		return []string{cIf}
	case *syntax.WhileClause, *syntax.ForClause:
		return []string{cLoop}
	case *syntax.CaseClause:
		return []string{cCase}
	case *syntax.TestClause, *syntax.TestDecl:
		return []string{cTest}
	case *syntax.CoprocClause:
		return []string{cCoproc}
	case *syntax.ExtGlob:
		return []string{cGlob}
	case *syntax.DblQuoted:
		if n.Dollar {
			return []string{cOther} // $"…" is translated at run time
		}
	case *syntax.TimeClause:
		return []string{cOther}
	}
	return nil
}

// wordConstructs finds the filename-generation constructs of a word, which
// hide in its unquoted literal parts rather than in nodes of their own.
func wordConstructs(w *syntax.Word) []string {
	var cs []string
	if len(w.Parts) > 0 {
		if l, ok := w.Parts[0].(*syntax.Lit); ok && strings.HasPrefix(l.Value, "~") {
			cs = append(cs, cTilde)
		}
	}
	for _, p := range w.Parts {
		if l, ok := p.(*syntax.Lit); ok && pattern.HasMeta(l.Value, 0) {
			cs = append(cs, cGlob)
			break
		}
	}
	// Mirror the interpreter: brace expansion is found on a copy, since
	// SplitBraces rewrites the parts it is given.
	cp := *w
	if syntax.SplitBraces(&cp) {
		cs = append(cs, cBraceExp)
	}
	return cs
}

// literalWord returns the value of a word made only of literal parts —
// unquoted literals without glob, tilde or brace syntax, single quotes,
// $'…', double quotes holding only literals — with quotes removed and
// escapes applied exactly as the interpreter would.
func literalWord(w *syntax.Word) (string, bool) {
	if len(wordConstructs(w)) > 0 {
		return "", false
	}
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit, *syntax.SglQuoted:
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
	// The interpreter's own expansion, with no environment and no
	// globbing, gives the exact argv element it will produce. The config is
	// fresh each time: expand fills in the config it is given, and with nil
	// it fills in a package-level one, a data race between two commands
	// prepared at once.
	fields, err := expand.Fields(&expand.Config{}, w)
	if err != nil || len(fields) != 1 {
		return "", false
	}
	return fields[0], true
}

// wordSource is the text of w in src, as the model wrote it.
func wordSource(w *syntax.Word, src string) string {
	start, end := int(w.Pos().Offset()), int(w.End().Offset())
	if start < 0 || end > len(src) || start > end {
		return ""
	}
	return src[start:end]
}
