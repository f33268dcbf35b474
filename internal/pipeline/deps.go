package pipeline

import (
	"context"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/decision"
)

// The pipeline's dependencies are the small interfaces below, declared
// where they are consumed: the gateway wires the real ones (Engine of a
// *decision.Engine, an *audit.Log), and tests may run the pipeline on
// fakes — no Rego compiled, no database opened.

// Policy is the enforced policy: the revision serving now, or an error
// when none is (the pipeline then fails closed with ErrPolicy).
type Policy interface {
	Current() (Revision, error)
}

// Revision is one loaded policy revision (*decision.Revision): its id,
// and its entrypoints evaluated on a request document.
type Revision interface {
	ID() string
	// Available is data.toolgate.availability.allow.
	Available(ctx context.Context, input ast.Value, opts ...decision.EvalOption) (bool, error)
	// Decide is data.toolgate.authz.decision.
	Decide(ctx context.Context, input ast.Value, opts ...decision.EvalOption) (decision.Decision, error)
	// Mask is data.toolgate.audit.mask.
	Mask(ctx context.Context, input ast.Value, opts ...decision.EvalOption) ([]string, error)
	// Evaluate is a policy administrator's evaluation, with its
	// explanation.
	Evaluate(ctx context.Context, input ast.Value, explain string) (*decision.Evaluation, error)
}

// AuditLog is the audit log the pipeline writes every step to, and reads
// a call's recorded events from (*audit.Log).
type AuditLog interface {
	// Append commits one event to its tenant's chain.
	Append(ctx context.Context, ev *audit.Event) error
	// AppendWith commits an event and, in the same transaction, the
	// record it announces (a held call's approval, an ask-user question).
	AppendWith(ctx context.Context, ev *audit.Event, rec any) error
	// Query is a page of a tenant's events, newest first.
	Query(ctx context.Context, tenant string, f audit.Filter) (audit.Page, error)
}

var _ AuditLog = (*audit.Log)(nil)

// Engine is the Policy of a policy engine.
func Engine(e *decision.Engine) Policy { return engine{e} }

type engine struct{ e *decision.Engine }

func (e engine) Current() (Revision, error) {
	rev, err := e.e.Current()
	if err != nil {
		return nil, err
	}
	return rev, nil
}
