package prepare

import (
	"sort"
	"strings"
)

// Problem is one broken rule of the arguments: a JSON pointer into the
// arguments ("" is the arguments object itself) and the rule.
type Problem struct {
	Pointer string `json:"pointer"`
	Rule    string `json:"rule"`
}

// InvalidArgumentsError reports arguments that failed decoding, the schema
// or normalization. Its message is model-safe: pointers and rules only,
// never a host path, file content or secret.
type InvalidArgumentsError struct {
	Problems []Problem
}

func invalid(pointer, rule string) *InvalidArgumentsError {
	return &InvalidArgumentsError{Problems: []Problem{{Pointer: pointer, Rule: rule}}}
}

// maxProblems bounds the feedback a model gets for one call.
const maxProblems = 8

// Error renders the feedback shown to the model, e.g.
// "invalid arguments: /path: missing required argument".
func (e *InvalidArgumentsError) Error() string {
	ps := append([]Problem(nil), e.Problems...)
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].Pointer < ps[j].Pointer })
	var b strings.Builder
	b.WriteString("invalid arguments: ")
	for i, p := range ps {
		if i == maxProblems {
			b.WriteString("; …")
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		ptr := p.Pointer
		if ptr == "" {
			ptr = "(arguments)"
		}
		b.WriteString(ptr)
		b.WriteString(": ")
		b.WriteString(p.Rule)
	}
	return b.String()
}
