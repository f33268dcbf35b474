package pipeline

import (
	"context"
	"errors"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/decision"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/prepare"
)

// ErrEvalRequest is a policy evaluation request that cannot be evaluated
// (a document of another tenant); the API answers 400.
var ErrEvalRequest = errors.New("invalid evaluation request")

// EvalRequest asks what the current revision would decide, without effect:
// either for a supplied request document, or for a would-be call (tool,
// arguments and a principal of the administrator's tenant to impersonate),
// which is availability-checked and prepared like a real call.
type EvalRequest struct {
	Admin     *identity.Identity
	Document  map[string]any // supplied request document; nil for a would-be call
	Tool      string
	Arguments []byte
	As        *identity.Identity // the impersonated principal; Tenant is set from Admin
	SessionID string
	Explain   string
}

// EvalResult is what the revision decided.
type EvalResult struct {
	Revision   string
	Outcome    apiv1.Outcome // allow, denied, approval_required, unavailable, invalid_arguments, error
	Available  bool
	Evaluation *decision.Evaluation // nil when unavailable or invalid
	Document   map[string]any       // the evaluated request document
	Problems   []any                // for invalid_arguments
	Reasons    []string
}

// Evaluate evaluates without effect and without an audit event.
func (p *Pipeline) Evaluate(ctx context.Context, req EvalRequest) (*EvalResult, error) {
	rev, err := p.revision()
	if err != nil {
		return nil, err
	}
	res := &EvalResult{Revision: rev.ID()}
	var doc map[string]any
	if req.Document != nil {
		doc = cloneDoc(req.Document)
		switch t, ok := doc["tenant"]; {
		case !ok:
			doc["tenant"] = req.Admin.Tenant
		case t != req.Admin.Tenant:
			return nil, fmt.Errorf("%w: the document's tenant must be your own", ErrEvalRequest)
		}
		avail := map[string]any{}
		for _, k := range []string{"tenant", "principal", "client", "session_id", "tool"} {
			if v, ok := doc[k]; ok {
				avail[k] = v
			}
		}
		in, err := ast.InterfaceToValue(avail)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrEvalRequest, err)
		}
		if res.Available, err = rev.Available(ctx, in); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrPolicy, err)
		}
	} else {
		id := *req.As
		id.Tenant, id.Client = req.Admin.Tenant, req.Admin.Client
		g, err := p.admit(ctx, rev, &id, req.SessionID, req.Tool)
		if err != nil {
			return nil, err
		}
		if !g.offered {
			// As on the request path: arguments of a tool that is not
			// offered are never decoded.
			res.Outcome, res.Reasons = apiv1.OutcomeUnavailable, []string{g.reason}
			return res, nil
		}
		res.Available = true
		env := *g.base
		env.SessionID, env.Principal = req.SessionID, id.Principal
		prep, err := p.o.Preparer.Prepare(ctx, prepare.Call{
			Identity: &id, SessionID: req.SessionID, CallID: "eval-" + p.o.NewID(), Tool: g.tool, Env: &env, RawArgs: req.Arguments,
			Schema: g.schema,
		})
		if err != nil {
			var ie *prepare.InvalidArgumentsError
			if errors.As(err, &ie) {
				res.Outcome, res.Reasons, res.Problems = apiv1.OutcomeInvalidArguments, []string{ie.Error()}, problems(ie)
				return res, nil
			}
			return nil, fmt.Errorf("%w: %v", errInternal, err)
		}
		doc = prep.Document()
	}
	res.Document = doc
	if !res.Available {
		res.Outcome, res.Reasons = apiv1.OutcomeUnavailable, []string{"availability policy did not offer the tool"}
		return res, nil
	}
	in, err := ast.InterfaceToValue(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrEvalRequest, err)
	}
	ev, err := rev.Evaluate(ctx, in, req.Explain)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPolicy, err)
	}
	res.Evaluation = ev
	switch d := ev.Decision; {
	case ev.Err != nil:
		res.Outcome, res.Reasons = apiv1.OutcomeError, []string{ev.Err.Error()}
	case !d.Allow:
		res.Outcome, res.Reasons = apiv1.OutcomeDenied, d.Reasons
	case d.ApprovalRequired:
		res.Outcome, res.Reasons = apiv1.OutcomeApprovalRequired, d.Reasons
	default:
		res.Outcome, res.Reasons = apiv1.OutcomeAllow, d.Reasons
	}
	if res.Reasons == nil {
		res.Reasons = []string{}
	}
	return res, nil
}
