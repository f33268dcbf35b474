package mcpserver

import (
	"context"
	"encoding/json"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/service"
)

// Questions is what the front door needs of service.Approvals to put an
// ask-user question to the caller's user itself (MCP elicitation): the
// asker's own question, the answer, and the call's result.
type Questions interface {
	CallQuestion(ctx context.Context, id *identity.Identity, callID string) (service.AskedQuestion, error)
	Answer(ctx context.Context, s service.AnswerStep) (apiv1.Question, error)
	CallStatus(ctx context.Context, id *identity.Identity, callID string, wait time.Duration) (apiv1.CallStatus, error)
}

// inputAnswer names the one input request of an ask-user call, and the
// one property of its form.
const inputAnswer = "answer"

// protocolMRTR is the first revision with multi round-trip requests
// (SEP-2322): input requests travel in the result, not as requests of
// the server.
const protocolMRTR = "2026-07-28"

// How a call's question can reach the caller's user.
type askMode int

const (
	askNot           askMode = iota // no elicitation: the awaiting_user result, as over REST
	askInputRequired                // 2026-07-28: an input_required result; the client retries with the answer
	askElicit                       // earlier revisions: elicitation/create on the session, during the call
)

// askModeOf is how the client of call can be asked: it must have
// declared form elicitation (a client that declares only URL mode cannot
// show a form).
func askModeOf(call *mcp.CallToolRequest) askMode {
	caps := call.ClientCapabilities()
	if caps == nil || caps.Elicitation == nil || (caps.Elicitation.Form == nil && caps.Elicitation.URL != nil) {
		return askNot
	}
	if call.ProtocolVersion() >= protocolMRTR {
		return askInputRequired
	}
	if call.Session != nil {
		return askElicit
	}
	return askNot
}

// elicitation is the form that asks q: its text as the message, one
// string property "answer", an enum of the options when it has some.
func elicitation(q service.AskedQuestion) *mcp.ElicitParams {
	prop := map[string]any{"type": "string", "title": "Answer"}
	if len(q.Options) > 0 {
		prop["enum"] = q.Options
	} else {
		prop["minLength"] = 1
	}
	return &mcp.ElicitParams{
		Mode: "form", Message: q.Text,
		RequestedSchema: map[string]any{
			"type":       "object",
			"properties": map[string]any{inputAnswer: prop},
			"required":   []string{inputAnswer},
		},
	}
}

// askUser handles an ask-user call that answered awaiting_user: when the
// client can elicit, the question goes to its user (an input_required
// result, or elicitation/create now); otherwise, or when the question
// cannot be read, the awaiting_user result stands and the question is
// answered over REST.
func (s *Server) askUser(ctx context.Context, id *identity.Identity, call *mcp.CallToolRequest, resp apiv1.CallResponse, requestID string) (*mcp.CallToolResult, error) {
	mode := askModeOf(call)
	if mode == askNot || s.o.Questions == nil {
		return callResult(resp), nil
	}
	qid, _ := resp.Data["question_id"].(string)
	expires, _ := resp.Data["expires_at"].(string)
	q, err := s.o.Questions.CallQuestion(ctx, id, resp.CallID)
	if err != nil || q.ID != qid || q.Status != "pending" {
		s.o.Logger.Info("mcp: ask-user question not elicited; the awaiting_user result stands",
			"tenant", id.Tenant, "principal", id.Principal, "call_id", resp.CallID, "question_id", qid, "err", err)
		return callResult(resp), nil
	}
	a := asking{
		QuestionID: q.ID, CallID: resp.CallID, DecisionID: resp.DecisionID, Tool: call.Params.Name,
		ExpiresAt: expires, Until: q.ExpiresAt.Unix(),
	}
	if mode == askInputRequired {
		return inputRequired(elicitation(q), s.states.seal(a, id), resp)
	}
	// Bounded by the question's life: an answer after it would be refused.
	ectx, cancel := context.WithDeadline(ctx, q.ExpiresAt)
	defer cancel()
	er, err := call.Session.Elicit(ectx, elicitation(q))
	if err != nil {
		// The client failed, went away or sent content outside the form
		// (the SDK checks it against the schema): nothing was answered.
		s.o.Logger.Info("mcp: elicitation failed; the question stays pending",
			"tenant", id.Tenant, "principal", id.Principal, "call_id", resp.CallID, "question_id", q.ID, "err", err)
		return callResult(resp), nil
	}
	return s.answered(ctx, id, a, er, requestID)
}

// inputRequired is the input_required result (SEP-2322) that asks the
// client for the elicitation, with the call's ids and outcome in _meta
// and no content.
func inputRequired(params *mcp.ElicitParams, state string, resp apiv1.CallResponse) (*mcp.CallToolResult, error) {
	r := &mcp.CallToolResult{
		Meta: mcp.Meta{
			MetaOutcome: string(resp.Outcome), MetaCallID: resp.CallID, MetaDecisionID: resp.DecisionID,
		},
		InputRequests: mcp.InputRequestMap{inputAnswer: params},
		RequestState:  state,
	}
	// The SDK marks a result input_required only for the tools it
	// registered; this front door answers tools/call itself, so the
	// result gets its type the way a client's does: from its JSON.
	raw, err := json.Marshal(r)
	var m map[string]json.RawMessage
	if err == nil {
		err = json.Unmarshal(raw, &m)
	}
	if err == nil {
		m["resultType"] = json.RawMessage(`"input_required"`)
		raw, err = json.Marshal(m)
	}
	out := new(mcp.CallToolResult)
	if err == nil {
		err = json.Unmarshal(raw, out)
	}
	if err != nil || !out.NeedsInput() || len(out.InputRequests) != 1 {
		return nil, rpcError(service.Errorf(service.KindInternal, "internal error"))
	}
	return out, nil
}

// resumeAsk is a 2026-07-28 client's retry of an ask-user call with its
// user's answer: the requestState names the question, sealed for this
// caller and tool; the answer goes through Answer as the caller, like
// POST /v1/questions/{id}/answer. Nothing runs again.
func (s *Server) resumeAsk(ctx context.Context, id *identity.Identity, call *mcp.CallToolRequest, requestID string) (*mcp.CallToolResult, error) {
	p := call.Params
	if s.o.Questions == nil || p.RequestState == "" {
		s.o.Logger.Info("mcp: tools/call with inputResponses but no requestState refused", "tenant", id.Tenant, "principal", id.Principal)
		return nil, rpcError(service.Errorf(service.KindInvalid, "%s; nothing was answered", errBadState))
	}
	a, err := s.states.open(p.RequestState, id, p.Name)
	if err != nil {
		s.o.Logger.Info("mcp: requestState refused", "tenant", id.Tenant, "principal", id.Principal, "tool", p.Name)
		return nil, rpcError(service.Errorf(service.KindInvalid, "%s; nothing was answered", err))
	}
	er, ok := p.InputResponses[inputAnswer].(*mcp.ElicitResult)
	if !ok || len(p.InputResponses) != 1 {
		return nil, rpcError(&service.Error{Kind: service.KindInvalid, CallID: a.CallID,
			Message: `inputResponses must hold one elicitation result, "answer"; nothing was answered`})
	}
	// The state is ours; the store still decides: the caller's own call,
	// the same question, not expired.
	q, err := s.o.Questions.CallQuestion(ctx, id, a.CallID)
	if err == nil && q.ID != a.QuestionID {
		err = service.Errorf(service.KindNotFound, "no such question")
	}
	if err != nil {
		return nil, rpcError(withCall(err, a.CallID))
	}
	return s.answered(ctx, id, a, er, requestID)
}

// answered records the user's answer to a's question and returns the
// call's result. A decline or cancel answers nothing (REST has no way
// to decline a question): the question stays pending for its expiry, the
// result is the call's current one, awaiting_user while pending.
func (s *Server) answered(ctx context.Context, id *identity.Identity, a asking, er *mcp.ElicitResult, requestID string) (*mcp.CallToolResult, error) {
	if er != nil && er.Action == "accept" {
		answer, ok := er.Content[inputAnswer].(string)
		if !ok {
			return nil, rpcError(&service.Error{Kind: service.KindInvalid, CallID: a.CallID,
				Message: `the elicitation's content must have a string "answer"; nothing was answered`})
		}
		if _, err := s.o.Questions.Answer(ctx, service.AnswerStep{Identity: id, ID: a.QuestionID, Answer: answer, Via: Via, MCPRequestID: requestID}); err != nil {
			return nil, rpcError(withCall(err, a.CallID))
		}
	}
	st, err := s.o.Questions.CallStatus(ctx, id, a.CallID, 0)
	if err == nil && st.Outcome == apiv1.OutcomePending && er != nil && er.Action == "accept" {
		// Answered here, so pending only until this replica sees it.
		st, err = s.o.Questions.CallStatus(ctx, id, a.CallID, service.MaxPollWait)
	}
	if err != nil {
		return nil, rpcError(withCall(err, a.CallID))
	}
	if st.Outcome == apiv1.OutcomePending {
		return callResult(a.awaiting()), nil
	}
	resp := apiv1.CallResponse{CallID: a.CallID, DecisionID: a.DecisionID, Outcome: st.Outcome, Data: st.Data}
	if st.Content != nil {
		resp.Content = *st.Content
	}
	if st.IsError != nil {
		resp.IsError = *st.IsError
	}
	return callResult(resp), nil
}

// withCall names the call a service error belongs to, for the JSON-RPC
// error's data.
func withCall(err error, callID string) error {
	e := *service.As(err)
	if e.CallID == "" {
		e.CallID = callID
	}
	return &e
}
