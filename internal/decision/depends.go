package decision

import (
	"context"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
)

// Depends reports whether the authorization decision on input could change
// with the values at unknowns (refs into input, such as input.args.content:
// values the audit log masked). It partially evaluates the decision with
// those refs unknown: a residual that still mentions input means the value
// matters. A policy that partial evaluation cannot handle counts as
// depending, so callers never guess.
func (r *Revision) Depends(ctx context.Context, input ast.Value, unknowns []ast.Ref) (bool, error) {
	if len(unknowns) == 0 {
		return false, nil
	}
	terms := make([]*ast.Term, len(unknowns))
	for i, u := range unknowns {
		terms[i] = ast.NewTerm(u)
	}
	pq, err := rego.New(
		rego.Query(AuthzQuery),
		rego.Compiler(r.compiled.compiler),
		rego.Store(r.compiled.store),
		rego.ParsedInput(input),
		rego.ParsedUnknowns(terms),
		rego.StrictBuiltinErrors(true),
	).Partial(ctx)
	if err != nil {
		return true, fmt.Errorf("%w: partial evaluation: %w", ErrEvaluation, err)
	}
	found := false
	visit := func(x any) bool {
		if ref, ok := x.(ast.Ref); ok && ref.HasPrefix(ast.InputRootRef) {
			found = true
		}
		return found
	}
	for _, q := range pq.Queries {
		ast.WalkRefs(q, func(ref ast.Ref) bool { return visit(ref) })
	}
	for _, m := range pq.Support {
		ast.WalkRefs(m, func(ref ast.Ref) bool { return visit(ref) })
	}
	if len(pq.Queries) == 0 {
		// Undefined for some values of the unknowns at least.
		return true, nil
	}
	return found, nil
}
