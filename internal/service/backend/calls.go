package backend

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/pipeline"
	"github.com/toolgate/toolgate/internal/service"
)

// NewCalls is the Calls service over a pipeline, checked
// (service.CheckedCalls).
func NewCalls(p *pipeline.Pipeline) service.Calls { return service.CheckedCalls(calls{p}) }

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
func rateLimited(r pipeline.Response) *service.Error {
	return &service.Error{
		Kind: service.KindRateLimited, Message: "a limit refused the call; nothing was run; retry after the Retry-After delay",
		CallID: r.CallID, DecisionID: r.DecisionID, RetryAfter: r.RetryAfter,
	}
}

func (s calls) Call(ctx context.Context, req service.CallRequest) (apiv1.CallResponse, error) {
	resp, err := s.p.Call(ctx, pipelineRequest(req))
	out := callResponse(resp)
	switch {
	case err != nil:
		return out, callError(err)
	case resp.Outcome == apiv1.OutcomeRateLimited:
		return out, rateLimited(resp)
	case resp.Permanent:
		// The tool ran (both events are audited) and said retrying cannot
		// help: a status the platform acts on, not a result for the model.
		return out, &service.Error{
			Kind: service.KindPermanent, Message: "the tool reported a permanent failure; end the run rather than retry",
			CallID: resp.CallID, DecisionID: resp.DecisionID,
		}
	}
	return out, nil
}

func (s calls) Decide(ctx context.Context, req service.CallRequest) (apiv1.DecisionResponse, error) {
	resp, err := s.p.Decide(ctx, pipelineRequest(req))
	out := decisionResponse(resp)
	switch {
	case err != nil:
		return out, callError(err)
	case resp.Outcome == apiv1.OutcomeRateLimited:
		return out, rateLimited(resp)
	}
	return out, nil
}

func (s calls) Batch(ctx context.Context, req service.BatchRequest, run bool) (service.BatchResult, error) {
	out := s.p.Batch(ctx, pipelineBatch(req), run)
	if out.Err != nil && out.Failed >= 0 {
		if ke := keyError(out.Err, fmt.Sprintf("calls[%d]: ", out.Failed)); ke != nil {
			return service.BatchResult{Failed: out.Failed}, ke // stopped before any call was decided
		}
	}
	res := service.BatchResult{Results: make([]any, len(out.Results)), Failed: -1}
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
	e := &service.Error{Kind: k, Message: reason + "; nothing was run", RetryAfter: retry, Err: out.Err}
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

// pipelineRequest is req as the pipeline takes it.
func pipelineRequest(req service.CallRequest) pipeline.Request {
	return pipeline.Request{
		Identity: req.Identity, Tool: req.Tool, Arguments: req.Arguments, SessionID: req.SessionID,
		CallID: req.CallID, Via: req.Via, MCPRequestID: req.MCPRequestID,
	}
}

// pipelineBatch is req as the pipeline takes it.
func pipelineBatch(req service.BatchRequest) pipeline.BatchRequest {
	out := pipeline.BatchRequest{Identity: req.Identity, SessionID: req.SessionID, Calls: make([]pipeline.BatchCall, len(req.Calls))}
	for i, c := range req.Calls {
		out.Calls[i] = pipeline.BatchCall{Tool: c.Tool, Arguments: c.Arguments, CallID: c.CallID}
	}
	return out
}
