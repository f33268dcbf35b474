package mcpserver

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/service"
)

func marshal(v any) (json.RawMessage, error) { return json.Marshal(v) }

// listTools is GET /v1/tools for the caller: what the availability
// policy offers, in declaration order, with the schema prepare enforces.
// All of it on one page.
func (s *Server) listTools(ctx context.Context, id *identity.Identity, session string) (*mcp.ListToolsResult, error) {
	tools, err := s.o.Calls.Tools(ctx, id, session)
	if err != nil {
		return nil, rpcError(err)
	}
	out := &mcp.ListToolsResult{Tools: make([]*mcp.Tool, 0, len(tools))}
	for _, t := range tools {
		out.Tools = append(out.Tools, &mcp.Tool{
			Name: t.Name, Description: t.Description, InputSchema: json.RawMessage(t.InputSchema),
		})
	}
	return out, nil
}

// Keys of a tools/call result's _meta: the call's ids and outcome, as the
// REST response has them.
const (
	MetaOutcome    = "io.toolgate/outcome"
	MetaCallID     = "io.toolgate/call_id"
	MetaDecisionID = "io.toolgate/decision_id"
)

// callTool runs one call through the same path as POST
// /v1/tools/{name}/calls: prepare, decide, audit, invoke. A refused or
// failed call is a result (its content the contract's string, isError as
// REST's is_error); a failure that is no tool result is a JSON-RPC error
// of its kind. An ask-user call may put its question to the caller's
// user through the client (askUser); the retry that brings a 2026-07-28
// client's answer runs nothing again (resumeAsk).
func (s *Server) callTool(ctx context.Context, id *identity.Identity, call *mcp.CallToolRequest, requestID string) (*mcp.CallToolResult, error) {
	p := call.Params
	if p.RequestState != "" || len(p.InputResponses) > 0 {
		return s.resumeAsk(ctx, id, call, requestID)
	}
	session := sessionOf(call)
	args := []byte(p.Arguments)
	if len(args) == 0 {
		args = []byte("{}") // MCP lets a call without arguments omit them
	}
	resp, err := s.o.Calls.Call(ctx, service.CallRequest{
		Identity: id, Tool: p.Name, Arguments: args, SessionID: session,
		Via: Via, MCPRequestID: requestID,
	})
	if err != nil {
		s.o.Logger.Info("mcp tools/call failed", "tenant", id.Tenant, "principal", id.Principal,
			"call_id", resp.CallID, "decision_id", resp.DecisionID, "err", err)
		return nil, rpcError(err)
	}
	if resp.Outcome == apiv1.OutcomeAwaitingUser {
		return s.askUser(ctx, id, call, resp, requestID)
	}
	return callResult(resp), nil
}

// callResult renders a call's response: its content as the first text
// block; a held call's approval id or a question's id as a second block,
// so the model can say what it waits for; data as structured content;
// ids and outcome in _meta. A held call is never an input request, in
// any revision: an approver, another principal, decides it, not the
// caller's user, so the client has nothing to fulfil.
func callResult(resp apiv1.CallResponse) *mcp.CallToolResult {
	r := &mcp.CallToolResult{
		Content: []mcp.Content{&mcp.TextContent{Text: resp.Content}},
		IsError: resp.IsError,
		Meta: mcp.Meta{
			MetaOutcome: string(resp.Outcome), MetaCallID: resp.CallID, MetaDecisionID: resp.DecisionID,
		},
	}
	switch resp.Outcome {
	case apiv1.OutcomeApprovalRequired:
		if v, ok := resp.Data["approval_id"].(string); ok {
			r.Content = append(r.Content, &mcp.TextContent{Text: "approval_id: " + v})
		}
	case apiv1.OutcomeAwaitingUser:
		if v, ok := resp.Data["question_id"].(string); ok {
			r.Content = append(r.Content, &mcp.TextContent{Text: "question_id: " + v})
		}
	}
	if len(resp.Data) > 0 {
		r.StructuredContent = resp.Data
	}
	return r
}
