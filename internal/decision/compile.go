package decision

import (
	"context"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/types"
)

// entrypoint indexes the contract's queries.
type entrypoint int

const (
	epAvailability entrypoint = iota
	epAuthz
	epMask
	numEntrypoints
)

var entrypointQueries = [numEntrypoints]string{AvailabilityQuery, AuthzQuery, MaskQuery}

// String is the entrypoint's metric label.
func (ep entrypoint) String() string {
	return [numEntrypoints]string{"availability", "authz", "mask"}[ep]
}

// compiled is a policy folder compiled in strict mode, with its data store.
type compiled struct {
	src      *source
	compiler *ast.Compiler
	store    storage.Store
}

// newStore holds the folder's data. AST values on read spare every
// evaluation a conversion of the data it touches.
func newStore(data map[string]any) storage.Store {
	return inmem.NewFromObjectWithOpts(data,
		inmem.OptRoundTripOnWrite(false),
		inmem.OptReturnASTValuesOnRead(true))
}

// compileSource compiles src in strict mode (Rego v1) and checks it against
// the policy contract. Problems are reported, never partially accepted.
func compileSource(ctx context.Context, src *source) (*compiled, []Problem, error) {
	store := newStore(src.data)
	txn, err := store.NewTransaction(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer store.Abort(ctx, txn)

	c := ast.NewCompiler().
		WithStrict(true).
		WithDefaultRegoVersion(ast.RegoV1).
		// A rule and a data document at the same path is an error, as in OPA.
		WithPathConflictsCheck(storage.NonEmpty(ctx, store, txn))
	c.Compile(src.modules)
	if c.Failed() {
		return nil, problemsOf(c.Errors), nil
	}
	if problems := contractProblems(c); len(problems) > 0 {
		return nil, problems, nil
	}
	return &compiled{src: src, compiler: c, store: store}, nil, nil
}

// prepare builds one prepared query per entrypoint. The mask query is nil
// when the folder defines no mask.
func (c *compiled) prepare(ctx context.Context) ([numEntrypoints]*rego.PreparedEvalQuery, error) {
	var out [numEntrypoints]*rego.PreparedEvalQuery
	for ep := range numEntrypoints {
		ref := ast.MustParseRef(entrypointQueries[ep])
		if ep == epMask && len(c.compiler.GetRulesExact(ref)) == 0 {
			continue
		}
		pq, err := rego.New(
			rego.Query(entrypointQueries[ep]),
			rego.Compiler(c.compiler),
			rego.Store(c.store),
			// A builtin error must fail the decision, not quietly make a
			// deny rule undefined.
			rego.StrictBuiltinErrors(true),
			// Results stay AST values: decisions are read without a detour
			// through Go maps.
			rego.GenerateJSON(astResult),
		).PrepareForEval(ctx)
		if err != nil {
			return out, fmt.Errorf("prepare %s: %w", entrypointQueries[ep], err)
		}
		out[ep] = &pq
	}
	return out, nil
}

// astResult keeps a query result as its AST value.
func astResult(t *ast.Term, _ *rego.EvalContext) (any, error) {
	return t.Value, nil
}

// contractProblems checks what the engine relies on: both entrypoints exist
// as rules (not functions), availability can be a boolean and the decision
// can be an object whose "allow" can be a boolean. Types are only judged
// where the type checker can tell; an unknown type passes.
func contractProblems(c *ast.Compiler) []Problem {
	var out []Problem
	for _, ep := range []entrypoint{epAvailability, epAuthz} {
		q := entrypointQueries[ep]
		ref := ast.MustParseRef(q)
		rules := c.GetRulesExact(ref)
		if len(rules) == 0 {
			out = append(out, Problem{Message: q + " is missing: the policy contract requires this rule"})
			continue
		}
		at := rules[0].Location
		if len(rules[0].Head.Args) > 0 {
			out = append(out, problemAt(at, q+" must be a rule, not a function"))
			continue
		}
		tpe := c.TypeEnv.GetByRef(ref)
		switch ep {
		case epAvailability:
			if !mayBe(tpe, isBoolean) {
				out = append(out, problemAt(at, fmt.Sprintf("%s must be a boolean, but it is %s", q, types.Sprint(tpe))))
			}
		case epAuthz:
			if !mayBe(tpe, isObject) {
				out = append(out, problemAt(at, fmt.Sprintf("%s must be an object, but it is %s", q, types.Sprint(tpe))))
			} else if allow := selectAllow(tpe); allow != nil && !mayBe(allow, isBoolean) {
				out = append(out, problemAt(at, fmt.Sprintf(`%s: "allow" must be a boolean, but it is %s`, q, types.Sprint(allow))))
			}
		}
	}
	return out
}

func problemAt(loc *ast.Location, msg string) Problem {
	p := Problem{Message: msg}
	if loc != nil {
		p.File, p.Line = loc.File, loc.Row
	}
	return p
}

// mayBe reports whether a value of type t can satisfy want. A nil or
// unconstrained type can.
func mayBe(t types.Type, want func(types.Type) bool) bool {
	switch x := t.(type) {
	case nil:
		return true
	case *types.NamedType:
		return mayBe(x.Type, want)
	case types.Any:
		if len(x) == 0 {
			return true
		}
		for _, m := range x {
			if mayBe(m, want) {
				return true
			}
		}
		return false
	}
	return want(t)
}

func isBoolean(t types.Type) bool {
	_, ok := t.(types.Boolean)
	return ok
}

func isObject(t types.Type) bool {
	_, ok := t.(*types.Object)
	return ok
}

// selectAllow is the type of the decision's "allow" when the checker knows
// it from a single object type; nil otherwise.
func selectAllow(t types.Type) types.Type {
	if n, ok := t.(*types.NamedType); ok {
		t = n.Type
	}
	obj, ok := t.(*types.Object)
	if !ok {
		return nil
	}
	return obj.Select("allow")
}
