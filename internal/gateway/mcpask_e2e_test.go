package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpSessionWith connects the Go SDK's client with options (an
// elicitation handler, multi round-trip off).
func (h *harness) mcpSessionWith(token, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	h.t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: h.base + "/mcp", HTTPClient: &http.Client{Transport: bearer{token: token}}, MaxRetries: -1}
	c := mcp.NewClient(&mcp.Implementation{Name: "toolgate-test", Version: "1"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		h.t.Fatalf("connect /mcp (%q): %v", version, err)
	}
	h.t.Cleanup(func() { cs.Close() })
	return cs
}

// user is an MCP client's user: it records what it was asked and
// answers with reply.
type user struct {
	mu    sync.Mutex
	asked []*mcp.ElicitParams
	reply func(*mcp.ElicitParams) *mcp.ElicitResult
}

func (u *user) handle(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
	u.mu.Lock()
	u.asked = append(u.asked, req.Params)
	u.mu.Unlock()
	return u.reply(req.Params), nil
}

func (u *user) questions() []*mcp.ElicitParams {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.asked)
}

func answering(answer string) func(*mcp.ElicitParams) *mcp.ElicitResult {
	return func(*mcp.ElicitParams) *mcp.ElicitResult {
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": answer}}
	}
}

// steps are the phase/outcome of a call's audit events, newest first.
func (h *harness) steps(tenant, callID string) string {
	h.t.Helper()
	var out []string
	for _, ev := range h.events(tenant, "call_id="+callID) {
		out = append(out, ev["phase"].(string)+"/"+ev["outcome"].(string))
	}
	return strings.Join(out, " ")
}

// schemaOf is the answer property of an elicitation's form.
func schemaOf(t *testing.T, p *mcp.ElicitParams) map[string]any {
	t.Helper()
	raw, err := json.Marshal(p.RequestedSchema)
	must(t, err)
	var s struct {
		Type       string                    `json:"type"`
		Properties map[string]map[string]any `json:"properties"`
		Required   []string                  `json:"required"`
	}
	must(t, json.Unmarshal(raw, &s))
	if s.Type != "object" || len(s.Properties) != 1 || fmt.Sprint(s.Required) != "[answer]" || s.Properties["answer"]["type"] != "string" {
		t.Fatalf("the form is not one string answer: %s", raw)
	}
	return s.Properties["answer"]
}

// An ask-user call from a client that can elicit puts the question to
// its user: a 2026-07-28 client through an input_required result and
// its retry, an older one through elicitation/create during the call.
// The tools/call answers with the call's real result (the answer, as
// GET /v1/calls has it), and the audit log has the answer by the caller
// beside the call's result event.
func TestMCPAskUserElicitsTheAnswer(t *testing.T) {
	t.Parallel()
	h := start(t, withAudience, withAskUser)
	alice := h.audToken(mcpAudience, "acme", "alice", "developer")
	for i, rev := range mcpRevisions {
		for _, withOptions := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/options=%v", rev, withOptions), func(t *testing.T) {
				question := fmt.Sprintf("Which branch should I deploy (%d)?", i)
				args := map[string]any{"question": question}
				answer := "main, then release"
				if withOptions {
					args["options"] = []string{"main", "release"}
					answer = "release"
				}
				u := &user{reply: answering(answer)}
				cs := h.mcpSessionWith(alice, rev, &mcp.ClientOptions{ElicitationHandler: u.handle})
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask-user", Arguments: args})
				if err != nil {
					t.Fatalf("tools/call: %v", err)
				}
				text := textOf(res)
				callID, _ := res.Meta["io.toolgate/call_id"].(string)
				data, _ := res.StructuredContent.(map[string]any)
				if res.IsError || res.NeedsInput() || res.Meta["io.toolgate/outcome"] != "ok" || len(text) != 1 || text[0] != answer ||
					data["answered_by"] != "alice" || callID == "" || res.Meta["io.toolgate/decision_id"] == "" {
					b, _ := json.Marshal(res)
					t.Fatalf("the result is not the answered call's: %s", b)
				}
				asked := u.questions()
				if len(asked) != 1 || asked[0].Message != question || (asked[0].Mode != "" && asked[0].Mode != "form") {
					t.Fatalf("the user was asked %+v", asked)
				}
				prop := schemaOf(t, asked[0])
				if enum := fmt.Sprint(prop["enum"]); withOptions != (enum == "[main release]") || (!withOptions && prop["enum"] != nil) {
					t.Fatalf("answer property %v", prop)
				}

				// As REST reads it, and as the audit log has it.
				if p := h.do("GET", "/v1/calls/"+callID, alice, nil); p.status != 200 || p.str("outcome") != "ok" || p.str("content") != answer {
					t.Fatalf("the call's status: %d %s", p.status, p.raw)
				}
				if got := h.steps("acme", callID); got != "question/answered result/awaiting_user decision/allow" {
					t.Fatalf("audit events of the call: %s", got)
				}
				ev := h.events("acme", "call_id="+callID)[0]
				q, _ := ev["question"].(map[string]any)
				if ev["principal"] != "alice" || q["by"] != "alice" {
					t.Fatalf("the answer event: %v", ev)
				}
				// The answer came through MCP, in a tools/call of its own
				// JSON-RPC id: the answer event says so, as the call's do.
				if id, _ := ev["mcp_request_id"].(string); ev["via"] != "mcp" || id == "" {
					t.Fatalf("the answer event does not name its front door and request: via %v, mcp_request_id %v", ev["via"], ev["mcp_request_id"])
				}
			})
		}
	}
	h.verify("acme")
}

// A client that cannot elicit gets today's result: awaiting_user with the
// question's id, answered over REST.
func TestMCPAskUserWithoutElicitationAwaitsTheUser(t *testing.T) {
	t.Parallel()
	h := start(t, withAudience, withAskUser)
	alice := h.audToken(mcpAudience, "acme", "alice", "developer")
	for _, rev := range mcpRevisions {
		t.Run(rev, func(t *testing.T) {
			cs := h.mcpSession(alice, rev)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask-user", Arguments: map[string]any{"question": "Which branch?", "options": []string{"a", "b"}}})
			if err != nil {
				t.Fatal(err)
			}
			assertAwaiting(t, h, alice, res)
		})
	}
}

// assertAwaiting checks an awaiting_user result that names its question,
// still pending (nobody answered it), and returns the question's id.
func assertAwaiting(t *testing.T, h *harness, token string, res *mcp.CallToolResult) (callID, questionID string) {
	t.Helper()
	text := textOf(res)
	questionID, _ = res.StructuredContent.(map[string]any)["question_id"].(string)
	callID, _ = res.Meta["io.toolgate/call_id"].(string)
	if res.IsError || res.NeedsInput() || res.Meta["io.toolgate/outcome"] != "awaiting_user" || len(text) != 2 || text[0] != "awaiting user" ||
		questionID == "" || text[1] != "question_id: "+questionID || callID == "" {
		b, _ := json.Marshal(res)
		t.Fatalf("not an awaiting_user result: %s", b)
	}
	if p := h.do("GET", "/v1/calls/"+callID, token, nil); p.status != 200 || p.str("outcome") != "pending" || p.str("question_id") != questionID {
		t.Fatalf("the question is not pending: %d %s", p.status, p.raw)
	}
	if got := h.steps("acme", callID); got != "result/awaiting_user decision/allow" {
		t.Fatalf("audit events of the call: %s", got)
	}
	return callID, questionID
}

// A user who declines (or cancels) answers nothing: REST has no way to
// decline a question, so it stays pending, the result is awaiting_user
// with its id, and the question can still be answered over REST.
func TestMCPAskUserDeclinedStaysPending(t *testing.T) {
	t.Parallel()
	h := start(t, withAudience, withAskUser)
	alice := h.audToken(mcpAudience, "acme", "alice", "developer")
	for _, rev := range mcpRevisions {
		for _, action := range []string{"decline", "cancel"} {
			t.Run(rev+"/"+action, func(t *testing.T) {
				u := &user{reply: func(*mcp.ElicitParams) *mcp.ElicitResult { return &mcp.ElicitResult{Action: action} }}
				cs := h.mcpSessionWith(alice, rev, &mcp.ClientOptions{ElicitationHandler: u.handle})
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask-user", Arguments: map[string]any{"question": "Deploy now?"}})
				if err != nil {
					t.Fatal(err)
				}
				if len(u.questions()) != 1 {
					t.Fatalf("the user was asked %d times", len(u.questions()))
				}
				_, qid := assertAwaiting(t, h, alice, res)
				if r := h.answer(alice, qid, "later"); r.status != 200 || r.str("status") != "answered" {
					t.Fatalf("REST answer after the decline: %d %s", r.status, r.raw)
				}
			})
		}
	}
}

// rpcCode is err's JSON-RPC error code (0 when it is none).
func rpcCode(err error) int64 {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je.Code
	}
	return 0
}

// The requestState of a 2026-07-28 input_required result names the
// caller's question for the caller and the tool only: a made-up,
// altered, or another principal's state is refused and answers nothing;
// an answer outside the options is refused as over REST; the asker's own
// retry answers once.
func TestMCPAskUserRequestStateIsTheAskers(t *testing.T) {
	t.Parallel()
	h := start(t, withAudience, withAskUser)
	alice := h.audToken(mcpAudience, "acme", "alice", "developer")
	noAuto := func() *mcp.ClientOptions {
		u := &user{reply: answering("unused")}
		return &mcp.ClientOptions{ElicitationHandler: u.handle, MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true}}
	}
	cs := h.mcpSessionWith(alice, "2026-07-28", noAuto())
	args := map[string]any{"question": "Ship it?", "options": []string{"yes", "no"}}
	first, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask-user", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	ep, _ := first.InputRequests["answer"].(*mcp.ElicitParams)
	callID, _ := first.Meta["io.toolgate/call_id"].(string)
	state := first.RequestState
	if !first.NeedsInput() || len(first.InputRequests) != 1 || ep == nil || ep.Message != "Ship it?" || state == "" ||
		first.Meta["io.toolgate/outcome"] != "awaiting_user" || callID == "" || len(first.Content) != 0 {
		b, _ := json.Marshal(first)
		t.Fatalf("not an input_required result: %s", b)
	}
	if fmt.Sprint(schemaOf(t, ep)["enum"]) != "[yes no]" {
		t.Fatalf("form %+v", ep.RequestedSchema)
	}
	if strings.Contains(state, alice) {
		t.Fatal("the state carries the credential")
	}
	retry := func(cs *mcp.ClientSession, tool, state string, responses mcp.InputResponseMap) (*mcp.CallToolResult, error) {
		return cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args, InputResponses: responses, RequestState: state})
	}
	yes := mcp.InputResponseMap{"answer": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "yes"}}}
	untouched := func(what string) {
		t.Helper()
		if p := h.do("GET", "/v1/calls/"+callID, alice, nil); p.status != 200 || p.str("outcome") != "pending" {
			t.Fatalf("%s: the question changed: %d %s", what, p.status, p.raw)
		}
		if got := h.steps("acme", callID); got != "result/awaiting_user decision/allow" {
			t.Fatalf("%s: audit events of the call: %s", what, got)
		}
	}

	tampered := []byte(state)
	tampered[6] ^= 1 // inside the payload
	bob := h.audToken(mcpAudience, "acme", "bob", "developer")
	support := h.audToken(mcpAudience, "acme", "support", "answerer")
	globexAlice := h.audToken(mcpAudience, "globex", "alice", "developer")
	for _, c := range []struct {
		name, token, tool, state string
	}{
		{"made up", alice, "ask-user", "tg1.eyJxIjoieCJ9.AAAA"},
		{"not ours", alice, "ask-user", "some-other-servers-state"},
		{"altered", alice, "ask-user", string(tampered)},
		{"another tool", alice, "read-file", state},
		{"another principal", bob, "ask-user", state},
		{"an answerer", support, "ask-user", state},
		{"another tenant", globexAlice, "ask-user", state},
		{"responses without state", alice, "ask-user", ""},
	} {
		other := cs
		if c.token != alice {
			other = h.mcpSessionWith(c.token, "2026-07-28", noAuto())
		}
		res, err := retry(other, c.tool, c.state, yes)
		if err == nil || rpcCode(err) != -32602 {
			t.Fatalf("%s: %v %+v", c.name, err, res)
		}
		untouched(c.name)
	}

	// Outside the options, or no answer: refused as REST refuses it.
	for name, responses := range map[string]mcp.InputResponseMap{
		"not an option": {"answer": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "maybe"}}},
		"no answer":     {"answer": &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}},
		"a number":      {"answer": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": 1}}},
		"another input": {"other": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "yes"}}},
	} {
		res, err := retry(cs, "ask-user", state, responses)
		if err == nil || rpcCode(err) != -32602 {
			t.Fatalf("%s: %v %+v", name, err, res)
		}
		if name == "not an option" && !strings.Contains(err.Error(), "exactly one of the question's options") {
			t.Fatalf("%s: %v", name, err)
		}
		untouched(name)
	}

	// The asker's retry answers: the call's result.
	res, err := retry(cs, "ask-user", state, yes)
	if err != nil || res.NeedsInput() || res.Meta["io.toolgate/outcome"] != "ok" || len(textOf(res)) != 1 || textOf(res)[0] != "yes" || res.Meta["io.toolgate/call_id"] != callID {
		t.Fatalf("the asker's retry: %v %+v", err, res)
	}
	// Once: the same state again is a conflict and changes nothing.
	no := mcp.InputResponseMap{"answer": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "no"}}}
	if _, err := retry(cs, "ask-user", state, no); rpcCode(err) != -32009 {
		t.Fatalf("a second answer: %v", err)
	}
	if p := h.do("GET", "/v1/calls/"+callID, alice, nil); p.str("content") != "yes" {
		t.Fatalf("the answer changed: %s", p.raw)
	}
	if got := h.steps("acme", callID); got != "question/answered result/awaiting_user decision/allow" {
		t.Fatalf("audit events of the call: %s", got)
	}
	h.verify("acme")
}
