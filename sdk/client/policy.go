package client

import (
	"context"
	"net/http"

	apiv1 "github.com/toolgate/toolgate/api/v1"
)

// Policy administration (role policy-admin).
type (
	// PolicyInfo is the serving revision, its modules and the last failed
	// reload.
	PolicyInfo = apiv1.PolicyInfo
	// PolicyEvalRequest is a request document or a would-be call to
	// evaluate.
	PolicyEvalRequest = apiv1.PolicyEvalRequest
	// PolicyEvalResponse is what the current revision decides.
	PolicyEvalResponse = apiv1.PolicyEvalResponse
)

// Policy returns the serving policy revision.
func (c *Client) Policy(ctx context.Context) (*PolicyInfo, error) {
	var out PolicyInfo
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/policy"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// EvalPolicy evaluates the current revision without effect or audit event.
func (c *Client) EvalPolicy(ctx context.Context, req PolicyEvalRequest) (*PolicyEvalResponse, error) {
	var out PolicyEvalResponse
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/policy/eval", body: req}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
