package pipeline

import (
	"context"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/toolgate/toolgate/internal/approval"
	"github.com/toolgate/toolgate/internal/identity"
)

// Questions lists the tenant's pending questions that id may answer,
// newest first, at most limit (approval.DefaultLimit when not positive):
// its own, and another principal's only when policy lets id answer it
// (the decision Answer takes, with input.answer). Every other question
// does not exist for id, as in Answer. Like the availability check of the
// tool listing, this read-side decision is not audited: it grants
// nothing, and Answer takes and audits it again.
func (p *Pipeline) Questions(ctx context.Context, id *identity.Identity, limit int) ([]*approval.Question, error) {
	out := []*approval.Question{}
	if p.o.Approvals == nil {
		return out, nil
	}
	limit = approval.Filter{Limit: limit}.PageSize()
	if err := p.expireQuestions(ctx, id.Tenant); err != nil {
		return nil, err
	}
	// The pending questions are few (approvals.max_pending bounds them),
	// so all are read and filtered here, before the limit applies.
	l, err := p.o.Approvals.ListQuestions(ctx, id.Tenant, approval.Filter{Status: approval.QuestionPending, Limit: approval.MaxLimit})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrAudit, err)
	}
	now := p.o.Now()
	for _, q := range l {
		if len(out) == limit {
			break
		}
		if !q.ExpiresAt.After(now) {
			continue
		}
		if q.Principal != id.Principal {
			ok, err := p.answerable(ctx, q, id)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
		}
		out = append(out, q)
	}
	return out, nil
}

// answerable is the decision mayAnswer takes, without its audit event.
func (p *Pipeline) answerable(ctx context.Context, q *approval.Question, id *identity.Identity) (bool, error) {
	rev, err := p.revision()
	if err != nil {
		return false, err
	}
	in, err := ast.InterfaceToValue(answerDocument(q, id))
	if err != nil {
		return false, fmt.Errorf("%w: %v", errInternal, err)
	}
	dec, err := rev.Decide(ctx, in)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrPolicy, err)
	}
	return dec.Allow, nil
}

// answerDocument is the stored request document of q with the answerer
// in input.answer: what policy decides when someone other than the asker
// answers.
func answerDocument(q *approval.Question, id *identity.Identity) map[string]any {
	doc := cloneDoc(q.Document)
	doc["answer"] = map[string]any{"id": id.Principal, "roles": anyStrings(id.Roles)}
	return doc
}
