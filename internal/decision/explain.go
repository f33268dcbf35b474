package decision

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/topdown/lineage"
)

// Explain modes of Evaluate, as in `opa eval --explain`.
const (
	ExplainNone  = ""
	ExplainNotes = "notes" // only trace() notes
	ExplainFails = "fails" // the expressions that failed
	ExplainFull  = "full"  // the whole evaluation
)

// ValidExplain reports whether mode is an explain mode.
func ValidExplain(mode string) bool {
	switch mode {
	case ExplainNone, ExplainNotes, ExplainFails, ExplainFull:
		return true
	}
	return false
}

// FiredRule is a rule that produced a value during an evaluation.
type FiredRule struct {
	Rule     string // e.g. data.toolgate.authz.deny
	Location string // file:row
	Title    string // the rule's METADATA title, if any
}

// Evaluation is an authorization decision evaluated for a policy
// administrator: the decision (or why it is malformed), the rules that
// fired, and optionally OPA's explanation.
type Evaluation struct {
	Decision Decision
	Raw      any // the decision as policy returned it (JSON), nil when undefined
	// Err is why there is no decision: ErrMalformed when the decision
	// breaks the contract, an *EvalError when the policy failed at run
	// time (a conflict, a builtin's error).
	Err         error
	Rules       []FiredRule
	Explanation []string
}

// Evaluate runs the authorization entrypoint on input with a tracer, for
// `POST /v1/policy/eval`. It is slower than Decide and never used on the
// request path. A malformed decision and a runtime error of the policy
// (with its code and location, and the explanation up to it) are reported
// in Evaluation.Err; other errors (a cancelled request) are returned.
func (r *Revision) Evaluate(ctx context.Context, input ast.Value, explain string) (*Evaluation, error) {
	if !ValidExplain(explain) {
		return nil, fmt.Errorf("decision: unknown explain mode %q", explain)
	}
	buf := topdown.NewBufferTracer()
	rs, err := r.queries[epAuthz].Eval(ctx, rego.EvalParsedInput(input), rego.EvalQueryTracer(buf))
	ee := EvalErrorOf(err)
	if err != nil && (ee == nil || ctx.Err() != nil) {
		return nil, fmt.Errorf("%w: %w", ErrEvaluation, err)
	}
	ev := &Evaluation{Rules: firedRules(*buf)}
	var v ast.Value
	if len(rs) > 0 && len(rs[0].Expressions) > 0 {
		v, _ = rs[0].Expressions[0].Value.(ast.Value)
	}
	switch {
	case ee != nil:
		ev.Err = ee
	case v == nil:
		ev.Err = fmt.Errorf("%w: decision is undefined", ErrMalformed)
	default:
		ev.Raw, _ = JSON(v) // numbers stay numbers in /v1/policy/eval
		if d, err := parseDecision(v); err != nil {
			ev.Err = fmt.Errorf("%w: %w", ErrMalformed, err)
		} else {
			ev.Decision = d
		}
	}
	var trace []*topdown.Event
	switch explain {
	case ExplainNotes:
		trace = lineage.Notes(*buf)
	case ExplainFails:
		trace = lineage.Fails(*buf)
	case ExplainFull:
		trace = lineage.Full(*buf)
	}
	if explain != ExplainNone {
		var out bytes.Buffer
		topdown.PrettyTraceWithLocation(&out, trace)
		ev.Explanation = strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
		if len(ev.Explanation) == 1 && ev.Explanation[0] == "" {
			ev.Explanation = []string{}
		}
	}
	return ev, nil
}

// firedRules lists the rules whose evaluation exited with a value, once
// each, sorted by rule path.
func firedRules(trace []*topdown.Event) []FiredRule {
	seen := map[string]bool{}
	var out []FiredRule
	for _, e := range trace {
		if e.Op != topdown.ExitOp {
			continue
		}
		rule, ok := e.Node.(*ast.Rule)
		if !ok {
			continue
		}
		f := FiredRule{Rule: rule.Path().String()}
		if loc := rule.Location; loc != nil {
			f.Location = fmt.Sprintf("%s:%d", loc.File, loc.Row)
		}
		if a := rule.Annotations; len(a) > 0 {
			f.Title = a[0].Title
		}
		key := f.Rule + "@" + f.Location
		if seen[key] {
			continue
		}
		seen[key] = true
		out = append(out, f)
	}
	slices.SortStableFunc(out, func(a, b FiredRule) int { return strings.Compare(a.Rule, b.Rule) })
	return out
}
