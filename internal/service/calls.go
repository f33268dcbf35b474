package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/pipeline"
)

// CallRequest is one call or decision as a front door received it:
// identity from the verified credential, the tool's name, the raw
// arguments (only prepare decodes them) and the optional session and
// call ids (a call_id is an idempotency key).
type CallRequest = pipeline.Request

// BatchRequest is the parallel tool calls of one model turn.
type BatchRequest = pipeline.BatchRequest

// BatchCall is one call of a batch.
type BatchCall = pipeline.BatchCall

// Calls lists the tools a caller may see, and decides and runs their
// calls: singly, as a decision only (PDP mode), or in batches.
type Calls interface {
	// Tools is what the availability policy offers id, in declaration
	// order, with the schema prepare enforces.
	Tools(ctx context.Context, id *identity.Identity, sessionID string) ([]apiv1.Tool, error)
	// Call decides and, when allowed, runs one call. A refused or failed
	// call is a result (outcome), not an error; the error kinds are
	// KindRateLimited and KindPermanent (audited: CallID and DecisionID
	// are set), the idempotency kinds (KindConflict, KindUnfinished), and
	// KindUnavailable or KindInternal (the gateway failed closed; nothing
	// ran). The response carries CallID and DecisionID whenever they are
	// known, also with an error.
	Call(ctx context.Context, req CallRequest) (apiv1.CallResponse, error)
	// Decide decides and audits one call without running it.
	Decide(ctx context.Context, req CallRequest) (apiv1.DecisionResponse, error)
	// Batch decides the calls of one turn and, when run is set, runs the
	// allowed ones concurrently (pipeline.Pipeline.Batch).
	Batch(ctx context.Context, req BatchRequest, run bool) (BatchResult, error)
}

// BatchResult is a batch's answer: one entry per call in request order,
// CallResponse values for a run and DecisionResponse values for a
// decision-only batch. When the batch failed, Batch's error is the
// batch's (its kind is that of the initiating failure, never a sibling's
// cancellation) and, when a call met the failure, the entry at Failed is
// an apiv1.BatchFailure. When a call_id stopped the batch before any call
// was decided, the error is all there is and Results is nil.
type BatchResult struct {
	Results []any
	Failed  int // -1 when no call met the failure
}

// NewCalls is the Calls service over a pipeline.
func NewCalls(p *pipeline.Pipeline) Calls { return calls{p} }

type calls struct{ p *pipeline.Pipeline }

func (s calls) Tools(ctx context.Context, id *identity.Identity, sessionID string) ([]apiv1.Tool, error) {
	specs, err := s.p.Tools(ctx, id, sessionID)
	if err != nil {
		return nil, callError(err)
	}
	out := make([]apiv1.Tool, 0, len(specs))
	for _, sp := range specs {
		out = append(out, apiv1.Tool{Name: sp.Name, Description: sp.Description, InputSchema: jsontext.Value(sp.InputSchema)})
	}
	return out, nil
}

func callResponse(r pipeline.Response) apiv1.CallResponse {
	return apiv1.CallResponse{
		CallID: r.CallID, DecisionID: r.DecisionID, Outcome: r.Outcome,
		Content: r.Content, IsError: r.IsError, Data: r.Data,
	}
}

func decisionResponse(r pipeline.Response) apiv1.DecisionResponse {
	return apiv1.DecisionResponse{
		CallID: r.CallID, DecisionID: r.DecisionID, Outcome: r.Outcome,
		Content: r.Content, RequestDigest: r.RequestDigest,
	}
}

// rateLimited is a call or decision that a limit refused (outcome
// rate_limited): audited, nothing ran.
func rateLimited(r pipeline.Response) *Error {
	return &Error{
		Kind: KindRateLimited, Message: "a limit refused the call; nothing was run; retry after the Retry-After delay",
		CallID: r.CallID, DecisionID: r.DecisionID, RetryAfter: r.RetryAfter,
	}
}

func (s calls) Call(ctx context.Context, req CallRequest) (apiv1.CallResponse, error) {
	resp, err := s.p.Call(ctx, req)
	out := callResponse(resp)
	switch {
	case err != nil:
		return out, callError(err)
	case resp.Outcome == apiv1.OutcomeRateLimited:
		return out, rateLimited(resp)
	case resp.Permanent:
		// The tool ran (both events are audited) and said retrying cannot
		// help: a status the platform acts on, not a result for the model.
		return out, &Error{
			Kind: KindPermanent, Message: "the tool reported a permanent failure; end the run rather than retry",
			CallID: resp.CallID, DecisionID: resp.DecisionID,
		}
	}
	return out, nil
}

func (s calls) Decide(ctx context.Context, req CallRequest) (apiv1.DecisionResponse, error) {
	resp, err := s.p.Decide(ctx, req)
	out := decisionResponse(resp)
	switch {
	case err != nil:
		return out, callError(err)
	case resp.Outcome == apiv1.OutcomeRateLimited:
		return out, rateLimited(resp)
	}
	return out, nil
}

func (s calls) Batch(ctx context.Context, req BatchRequest, run bool) (BatchResult, error) {
	out := s.p.Batch(ctx, req, run)
	if out.Err != nil && out.Failed >= 0 {
		if ke := keyError(out.Err, fmt.Sprintf("calls[%d]: ", out.Failed)); ke != nil {
			return BatchResult{Failed: out.Failed}, ke // stopped before any call was decided
		}
	}
	res := BatchResult{Results: make([]any, len(out.Results)), Failed: -1}
	for i, r := range out.Results {
		if run {
			res.Results[i] = callResponse(r)
		} else {
			res.Results[i] = decisionResponse(r)
		}
	}
	if out.Err == nil {
		return res, nil
	}
	k, reason, retry := failure(out.Err)
	e := &Error{Kind: k, Message: reason + "; nothing was run", RetryAfter: retry, Err: out.Err}
	if out.Failed >= 0 {
		res.Failed = out.Failed
		f := out.Results[out.Failed]
		callMsg := reason + "; this call was not run"
		if errors.Is(out.Err, pipeline.ErrToolPermanent) {
			// As a single call's 424: the call ran (both its events are
			// audited) and retrying cannot help.
			callMsg = reason + "; end the run rather than retry"
		}
		res.Results[out.Failed] = apiv1.BatchFailure{CallID: f.CallID, DecisionID: f.DecisionID,
			Error: apiv1.ErrorDetail{Code: k.Code(), Message: callMsg}}
		e.Message = fmt.Sprintf("%s at calls[%d]; the batch was canceled (see results: calls that had finished keep their results, the others are canceled)", reason, out.Failed)
	}
	return res, e
}

// LimitTenantRate is the toolgate_rate_limited_total label of a request
// refused by limits.tenant_rate (a front door checks it before reading
// the body).
const LimitTenantRate = pipeline.LimitTenantRate
