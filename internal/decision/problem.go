package decision

import (
	"errors"
	"strconv"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/loader"
)

// Problem is one defect of a policy folder: a parse or strict compile error,
// a missing or mistyped entrypoint, or a rule that breaks the contract.
type Problem struct {
	File    string // relative to the policy folder, slash-separated; "" if none
	Line    int    // 1-based; 0 if unknown
	Message string
}

// String formats p as "file:line: message", like OPA's own errors.
func (p Problem) String() string {
	switch {
	case p.File != "" && p.Line > 0:
		return p.File + ":" + strconv.Itoa(p.Line) + ": " + p.Message
	case p.File != "":
		return p.File + ": " + p.Message
	}
	return p.Message
}

// FormatProblems joins problems one a line.
func FormatProblems(problems []Problem) string {
	var b strings.Builder
	for i, p := range problems {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// LoadError is why a policy folder was rejected. The revision that was
// serving before keeps serving.
type LoadError struct {
	Problems []Problem
}

// Error lists the problems, one a line, each naming file:line.
func (e *LoadError) Error() string {
	if len(e.Problems) == 1 {
		return "policy rejected: " + e.Problems[0].String()
	}
	return "policy rejected, " + strconv.Itoa(len(e.Problems)) + " problems:\n" + FormatProblems(e.Problems)
}

// problemsOf turns loader and compiler errors into problems.
func problemsOf(err error) []Problem {
	var out []Problem
	var add func(error)
	add = func(err error) {
		var astErrs ast.Errors
		var loadErrs loader.Errors
		var astErr *ast.Error
		switch {
		case errors.As(err, &loadErrs):
			for _, e := range loadErrs {
				add(e)
			}
		case errors.As(err, &astErrs):
			for _, e := range astErrs {
				add(e)
			}
		case errors.As(err, &astErr):
			out = append(out, problemOf(astErr))
		default:
			out = append(out, Problem{Message: err.Error()})
		}
	}
	add(err)
	return out
}

func problemOf(e *ast.Error) Problem {
	p := Problem{Message: e.Code + ": " + e.Message}
	if e.Location != nil {
		p.File, p.Line = e.Location.File, e.Location.Row
	}
	if e.Details != nil {
		for _, line := range e.Details.Lines() {
			p.Message += "\n\t" + line
		}
	}
	return p
}
