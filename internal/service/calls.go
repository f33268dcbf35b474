package service

import (
	"context"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/identity"
)

// CallRequest is one call or decision as a front door received it:
// identity from the verified credential, the tool's name, the raw
// arguments (only prepare decodes them) and the optional session and
// call ids (a call_id is an idempotency key). Calls checks SessionID and
// CallID (ValidID) before anything is decided.
type CallRequest struct {
	Identity  *identity.Identity
	Tool      string
	Arguments []byte
	SessionID string
	CallID    string
	// Via names the front door when it is not REST ("mcp"), and
	// MCPRequestID the JSON-RPC id of the MCP request; both are recorded
	// on the call's audit events and change nothing else.
	Via          string
	MCPRequestID string
}

// BatchRequest is the parallel tool calls of one model turn.
type BatchRequest struct {
	Identity  *identity.Identity
	SessionID string
	Calls     []BatchCall
}

// BatchCall is one call of a batch. Arguments are raw bytes that only
// prepare decodes; CallID is optional (an idempotency key, as for a
// single call).
type BatchCall struct {
	Tool      string
	Arguments []byte
	CallID    string
}

// Calls lists the tools a caller may see, and decides and runs their
// calls: singly, as a decision only (PDP mode), or in batches. No role
// is needed: policy decides.
type Calls interface {
	// Tools is what the availability policy offers id, in declaration
	// order, with the schema prepare enforces.
	Tools(ctx context.Context, id *identity.Identity, sessionID string) ([]apiv1.Tool, error)
	// Call decides and, when allowed, runs one call. A refused or failed
	// call is a result (outcome), not an error; the error kinds are
	// KindInvalid (a session_id or call_id that is no id: nothing was
	// decided), KindRateLimited and KindPermanent (audited: CallID and
	// DecisionID are set), the idempotency kinds (KindConflict,
	// KindUnfinished), and KindUnavailable or KindInternal (the gateway
	// failed closed; nothing ran). The response carries CallID and
	// DecisionID whenever they are known, also with an error.
	Call(ctx context.Context, req CallRequest) (apiv1.CallResponse, error)
	// Decide decides and audits one call without running it.
	Decide(ctx context.Context, req CallRequest) (apiv1.DecisionResponse, error)
	// Batch decides the calls of one turn and, when run is set, runs the
	// allowed ones concurrently.
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

// LimitTenantRate is the toolgate_rate_limited_total label of a request
// refused by limits.tenant_rate (a front door checks it before reading
// the body).
const LimitTenantRate = "tenant_rate"
