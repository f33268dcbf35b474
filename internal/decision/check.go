package decision

import (
	"context"
	"fmt"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/util"
)

// Check compiles the policy folder dir as the engine would (strict, Rego
// v1), checks it against the policy contract, and lints what the engine
// cannot reject outright: an availability rule that reads input.args or
// input.resources, which availability input never has, so the rule can
// only be undefined there. It returns every problem found (none means the
// engine would load the folder); err is for a folder that cannot be read.
func Check(ctx context.Context, dir string) ([]Problem, error) {
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
	return availabilityInputProblems(c.compiler), nil
}

// availabilityInputProblems finds references to input.args and
// input.resources in the availability rule and every rule or function it
// depends on.
func availabilityInputProblems(c *ast.Compiler) []Problem {
	seen := map[util.T]bool{}
	var queue []util.T
	for _, r := range c.GetRulesExact(ast.MustParseRef(AvailabilityQuery)) {
		queue = append(queue, r)
	}
	var out []Problem
	reported := map[string]bool{}
	for len(queue) > 0 {
		node := queue[0]
		queue = queue[1:]
		if seen[node] {
			continue
		}
		seen[node] = true
		for dep := range c.Graph.Dependencies(node) {
			queue = append(queue, dep)
		}
		rule, ok := node.(*ast.Rule)
		if !ok {
			continue
		}
		ast.WalkRefs(rule, func(ref ast.Ref) bool {
			if len(ref) < 2 || !ref[0].Equal(ast.InputRootDocument) {
				return false
			}
			key, ok := ref[1].Value.(ast.String)
			if !ok || (key != "args" && key != "resources") {
				return false
			}
			p := problemAt(ref[0].Location, fmt.Sprintf(
				"%s reads input.%s, but availability input has no %s: the rule is undefined there (move the check to the authorization decision)",
				AvailabilityQuery, string(key), string(key)))
			if k := p.String(); !reported[k] {
				reported[k] = true
				out = append(out, p)
			}
			return false
		})
	}
	slices.SortFunc(out, func(a, b Problem) int {
		if a.File != b.File {
			if a.File < b.File {
				return -1
			}
			return 1
		}
		return a.Line - b.Line
	})
	return out
}
