package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	apiv1 "github.com/toolgate/toolgate/api/v1"
)

// The API's wire types under the names this package uses.
type (
	// Tool is an offered tool; InputSchema is exactly what calls are
	// checked against.
	Tool = apiv1.Tool
	// CallResult is the outcome of a call: what the model sees.
	CallResult = apiv1.CallResponse
	// Decision is the outcome of Decide (PDP mode).
	Decision = apiv1.DecisionResponse
	// BatchResult is one entry of a batch's results.
	BatchResult = apiv1.BatchResult
	// CallStatus is a polled held or ask-user call.
	CallStatus = apiv1.CallStatus
)

// ListTools returns the tools the availability policy offers the caller,
// in declaration order. sessionID may be empty.
func (c *Client) ListTools(ctx context.Context, sessionID string) ([]Tool, error) {
	q := url.Values{}
	if sessionID != "" {
		q.Set("session_id", sessionID)
	}
	var out apiv1.ToolList
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/tools", query: q}, &out); err != nil {
		return nil, err
	}
	return out.Tools, nil
}

// CallOptions are the optional members of a call.
type CallOptions struct {
	SessionID string
	// CallID is the call's idempotency key: a retry with the same CallID
	// (after a network error, or a 429's RetryAfter) is answered with the
	// first call's recorded response instead of running again; the same
	// CallID with other arguments or another tool is ErrConflict. The
	// gateway generates one when it is empty.
	CallID string
}

// arguments marshals a call's arguments: anything that marshals to a JSON
// object (a struct, a map, a json.RawMessage); nil is {}.
func arguments(args any) (jsontext.Value, error) {
	if args == nil {
		return jsontext.Value("{}"), nil
	}
	b, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("client: encoding the arguments: %w", err)
	}
	return b, nil
}

func callRequest(args any, o *CallOptions) (apiv1.CallRequest, error) {
	a, err := arguments(args)
	b := apiv1.CallRequest{Arguments: a}
	if o != nil {
		b.SessionID, b.CallID = o.SessionID, o.CallID
	}
	return b, err
}

// Call decides a call and, when allowed, runs it. args is anything that
// marshals to a JSON object (a struct, a map, a json.RawMessage).
func (c *Client) Call(ctx context.Context, tool string, args any, o *CallOptions) (*CallResult, error) {
	body, err := callRequest(args, o)
	if err != nil {
		return nil, err
	}
	var out CallResult
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/tools/" + seg(tool) + "/calls", body: body}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Decide prepares, decides and audits a call without running it, for
// platforms that run tools themselves.
func (c *Client) Decide(ctx context.Context, tool string, args any, o *CallOptions) (*Decision, error) {
	body, err := callRequest(args, o)
	if err != nil {
		return nil, err
	}
	var out Decision
	if err := c.do(ctx, request{method: http.MethodPost, path: "/v1/tools/" + seg(tool) + "/decisions", body: body}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// BatchCall is one call of a batch: the tool, its arguments (anything that
// marshals to a JSON object; nil is {}) and an optional call_id.
type BatchCall struct {
	Tool      string
	Arguments any
	CallID    string
}

func batchRequest(sessionID string, calls []BatchCall) (apiv1.BatchRequest, error) {
	req := apiv1.BatchRequest{SessionID: sessionID, Calls: make([]apiv1.BatchCall, len(calls))}
	for i, bc := range calls {
		a, err := arguments(bc.Arguments)
		if err != nil {
			return req, fmt.Errorf("calls[%d]: %w", i, err)
		}
		req.Calls[i] = apiv1.BatchCall{Tool: bc.Tool, Arguments: a, CallID: bc.CallID}
	}
	return req, nil
}

// Batch runs a model turn's parallel calls (POST /v1/batches) and returns
// their results in request order. When a call's permanent failure (or a
// policy or audit failure) cancels the batch, the *Error carries what
// became of each call in Results.
func (c *Client) Batch(ctx context.Context, sessionID string, calls []BatchCall) ([]BatchResult, error) {
	return c.batch(ctx, "/v1/batches", sessionID, calls)
}

// DecideBatch decides a whole batch without running it (PDP mode).
func (c *Client) DecideBatch(ctx context.Context, sessionID string, calls []BatchCall) ([]BatchResult, error) {
	return c.batch(ctx, "/v1/batches/decisions", sessionID, calls)
}

func (c *Client) batch(ctx context.Context, path, sessionID string, calls []BatchCall) ([]BatchResult, error) {
	body, err := batchRequest(sessionID, calls)
	if err != nil {
		return nil, err
	}
	var out apiv1.BatchResponse
	if err := c.do(ctx, request{method: http.MethodPost, path: path, body: body}, &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}
