package decision

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/tester"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/types"
)

// CheckOptions add checks that need more than the policy folder.
type CheckOptions struct {
	// Tools are the tool names the configuration enables: each must be
	// offerable by the availability rule for some caller.
	Tools []string
	// TestDirs hold the pack's Rego tests: every rule of the policy must
	// produce a value for at least one test input.
	TestDirs []string
}

// CheckWith is Check plus the checks of opts.
func CheckWith(ctx context.Context, dir string, opts CheckOptions) ([]Problem, error) {
	src, problems, err := readSource(dir)
	if err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		return problems, nil
	}
	c, problems, err := compileSource(ctx, src)
	if err != nil {
		return nil, err
	}
	if len(problems) > 0 {
		return problems, nil
	}
	if _, err := c.prepare(ctx); err != nil {
		return problemsOf(err), nil
	}
	out := availabilityInputProblems(c.compiler)
	out = append(out, decisionTypeProblems(c.compiler)...)
	for _, tool := range opts.Tools {
		p, err := neverOffered(ctx, c, tool)
		if err != nil {
			return nil, err
		}
		out = append(out, p...)
	}
	if len(opts.TestDirs) > 0 {
		p, err := unmatchedRules(ctx, dir, src, opts.TestDirs)
		if err != nil {
			return nil, err
		}
		out = append(out, p...)
	}
	return out, nil
}

// decisionTypeProblems reports an authorization decision that the type
// checker knows can be something other than an object (one rule yields an
// object, another a string, ...): such a decision fails closed at run time.
func decisionTypeProblems(c *ast.Compiler) []Problem {
	ref := ast.MustParseRef(AuthzQuery)
	rules := c.GetRulesExact(ref)
	if len(rules) == 0 {
		return nil
	}
	tpe := c.TypeEnv.GetByRef(ref)
	if n, ok := tpe.(*types.NamedType); ok {
		tpe = n.Type
	}
	any, ok := tpe.(types.Any)
	if !ok || len(any) == 0 {
		return nil
	}
	var others []string
	for _, m := range any {
		if !isObject(m) {
			others = append(others, types.Sprint(m))
		}
	}
	if len(others) == 0 {
		return nil
	}
	return []Problem{problemAt(rules[0].Location, fmt.Sprintf(
		"%s can be %s, not an object: such a decision denies every call it applies to (fail closed)",
		AuthzQuery, strings.Join(others, " or ")))}
}

// neverOffered partially evaluates the availability rule for tool, with
// everything but the tool's name unknown: no residual query means no
// caller, tenant or session can ever be offered it.
func neverOffered(ctx context.Context, c *compiled, tool string) ([]Problem, error) {
	input := ast.NewObject(ast.Item(ast.StringTerm("tool"), ast.ObjectTerm(ast.Item(ast.StringTerm("name"), ast.StringTerm(tool)))))
	var unknowns []*ast.Term
	for _, u := range []string{"input.tenant", "input.principal", "input.client", "input.session_id",
		"input.tool.kind", "input.tool.effects", "input.tool.annotations"} {
		unknowns = append(unknowns, ast.MustParseTerm(u))
	}
	pq, err := rego.New(
		rego.Query(AvailabilityQuery+" == true"),
		rego.Compiler(c.compiler),
		rego.Store(c.store),
		rego.ParsedInput(input),
		rego.ParsedUnknowns(unknowns),
	).Partial(ctx)
	if err != nil {
		// Partial evaluation cannot tell: say nothing rather than guess.
		return nil, nil
	}
	if len(pq.Queries) > 0 || len(pq.Support) > 0 {
		return nil, nil
	}
	at := c.compiler.GetRulesExact(ast.MustParseRef(AvailabilityQuery))[0].Location
	return []Problem{problemAt(at, fmt.Sprintf(
		"tool %q is enabled in the configuration, but %s can never offer it to anyone", tool, AvailabilityQuery))}, nil
}

// ruleExits records the rules that produced a value during the tests.
type ruleExits struct {
	mu   sync.Mutex
	seen map[*ast.Location]bool
}

func (r *ruleExits) Enabled() bool               { return true }
func (r *ruleExits) Config() topdown.TraceConfig { return topdown.TraceConfig{} }
func (r *ruleExits) TraceEvent(e topdown.Event) {
	if e.Op != topdown.ExitOp {
		return
	}
	if rule, ok := e.Node.(*ast.Rule); ok && rule.Location != nil {
		r.mu.Lock()
		r.seen[rule.Location] = true
		r.mu.Unlock()
	}
}

// unmatchedRules runs the pack's tests and reports the policy's rules
// that no test input made produce a value: a rule that silently matches
// nothing.
func unmatchedRules(ctx context.Context, dir string, src *source, testDirs []string) ([]Problem, error) {
	dirs := append([]string{dir}, testDirs...)
	modules, store, err := tester.LoadWithParserOptions(dirs, fileFilter(true), ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
	if err != nil {
		return nil, err
	}
	txn, err := store.NewTransaction(ctx, storage.WriteParams)
	if err != nil {
		return nil, err
	}
	defer store.Abort(ctx, txn)
	exits := &ruleExits{seen: map[*ast.Location]bool{}}
	ch, err := tester.NewRunner().
		SetCompiler(ast.NewCompiler().WithStrict(true).WithDefaultRegoVersion(ast.RegoV1).WithEnablePrintStatements(true)).
		SetStore(store).
		SetModules(modules).
		CapturePrintOutput(true).
		SetCoverageQueryTracer(exits).
		RunTests(ctx, txn)
	if err != nil {
		return nil, err
	}
	ran := 0
	for range ch {
		ran++
	}
	if ran == 0 {
		return []Problem{{Message: "no Rego tests found in " + strings.Join(testDirs, ", ") + ": cannot tell which rules match nothing"}}, nil
	}
	// Rules of the policy folder itself (not of its tests), matched by
	// file and row: the tester parsed its own copies of the modules.
	fired := map[string]bool{}
	for loc := range exits.seen {
		fired[fmt.Sprintf("%s:%d", loc.File, loc.Row)] = true
	}
	var out []Problem
	for file, m := range modules {
		rel, ok := policyFile(file, dir, src)
		if !ok {
			continue
		}
		for _, rule := range m.Rules {
			if rule.Location == nil || fired[fmt.Sprintf("%s:%d", file, rule.Location.Row)] {
				continue
			}
			out = append(out, Problem{File: rel, Line: rule.Location.Row, Message: fmt.Sprintf(
				"rule %s never produced a value for any of the tests' inputs: it may match nothing (add a test that fires it, or remove it)",
				rule.Path().String())})
		}
	}
	slices.SortFunc(out, func(a, b Problem) int { return cmp.Or(strings.Compare(a.File, b.File), a.Line-b.Line) })
	return out, nil
}

// policyFile maps a module path loaded by the tester back to the policy
// folder's relative path, when it is one of the served modules.
func policyFile(file, dir string, src *source) (string, bool) {
	rel := strings.TrimPrefix(strings.TrimPrefix(file, strings.TrimSuffix(dir, "/")), "/")
	_, ok := src.modules[rel]
	return rel, ok
}
