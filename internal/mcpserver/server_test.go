package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/service"
)

// fakeCalls answers by tool name and records the requests it saw.
type fakeCalls struct {
	mu   sync.Mutex
	seen []service.CallRequest
}

func (f *fakeCalls) Tools(context.Context, *identity.Identity, string) ([]apiv1.Tool, error) {
	return []apiv1.Tool{{Name: "echo", Description: "Echo.", InputSchema: []byte(`{"type":"object"}`)}}, nil
}

var failures = map[string]*service.Error{
	"limited":  {Kind: service.KindRateLimited, Message: "a limit refused the call", CallID: "c-1", DecisionID: "d-1", RetryAfter: 1500 * time.Millisecond},
	"busy":     {Kind: service.KindUnavailable, Message: "audit log is unavailable; nothing was run"},
	"conflict": {Kind: service.KindConflict, Message: "call_id was already used"},
	"internal": {Kind: service.KindInternal, Message: "internal error", Err: errors.New("secret detail /etc/x")},
}

func (f *fakeCalls) Call(_ context.Context, req service.CallRequest) (apiv1.CallResponse, error) {
	f.mu.Lock()
	f.seen = append(f.seen, req)
	f.mu.Unlock()
	if e, ok := failures[req.Tool]; ok {
		return apiv1.CallResponse{CallID: e.CallID, DecisionID: e.DecisionID}, e
	}
	return apiv1.CallResponse{CallID: "c", DecisionID: "d", Outcome: apiv1.OutcomeOK, Content: string(req.Arguments)}, nil
}

func (f *fakeCalls) Decide(context.Context, service.CallRequest) (apiv1.DecisionResponse, error) {
	return apiv1.DecisionResponse{}, errors.New("not used")
}

func (f *fakeCalls) Batch(context.Context, service.BatchRequest, bool) (service.BatchResult, error) {
	return service.BatchResult{}, errors.New("not used")
}

// fakeAuth: "key-<p>" is an API key of principal p, "jwt-<p>" a JWT.
type fakeAuth struct{}

func (fakeAuth) Authenticate(r *http.Request) (*identity.Identity, error) {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if p, ok := strings.CutPrefix(tok, "key-"); ok {
		return &identity.Identity{Tenant: "acme", Principal: p, Method: "api_key"}, nil
	}
	if p, ok := strings.CutPrefix(tok, "jwt-"); ok {
		return &identity.Identity{Tenant: "acme", Principal: p, Method: "jwt"}, nil
	}
	return nil, &auth.Error{Reason: auth.ReasonMalformedToken}
}

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

func serve(t *testing.T, o Options) (*httptest.Server, *fakeCalls) {
	t.Helper()
	calls := &fakeCalls{}
	o.Calls, o.Auth = calls, fakeAuth{}
	srv := httptest.NewServer(New(o).Handler())
	t.Cleanup(srv.Close)
	return srv, calls
}

func connect(t *testing.T, url, token, version string) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{
		Endpoint: url + Path, HTTPClient: &http.Client{Transport: bearer(token)}, MaxRetries: -1,
	}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// A failure that is no tool result reaches the client as the JSON-RPC
// error of its kind (service.Kind's table), with the safe message and the
// REST code, call ids and retry delay as data; never the cause.
func TestServiceErrorsAreJSONRPCErrorsOfTheirKind(t *testing.T) {
	srv, _ := serve(t, Options{})
	for _, rev := range []string{"2026-07-28", "2025-11-25"} {
		cs, err := connect(t, srv.URL, "key-bot", rev)
		if err != nil {
			t.Fatal(err)
		}
		for tool, want := range failures {
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{}})
			var je *jsonrpc.Error
			if !errors.As(err, &je) {
				t.Fatalf("%s %s: %v is no JSON-RPC error", rev, tool, err)
			}
			var data map[string]any
			_ = json.Unmarshal(je.Data, &data)
			if je.Code != want.Kind.JSONRPCCode() || je.Message != want.Message || data["code"] != want.Kind.Code() || strings.Contains(string(je.Data), "secret") {
				t.Errorf("%s %s: %d %q %s", rev, tool, je.Code, je.Message, je.Data)
			}
			if tool == "limited" && (data["retry_after_seconds"] != 2.0 || data["call_id"] != "c-1" || data["decision_id"] != "d-1") {
				t.Errorf("rate limited data: %s", je.Data)
			}
		}
	}
}

// The services see the call as REST would make it, plus where it came
// from: the identity, the MCP session, via "mcp" and the JSON-RPC id; a
// call without arguments has empty ones.
func TestCallsCarryTheirMCPOrigin(t *testing.T) {
	srv, calls := serve(t, Options{})
	cs, err := connect(t, srv.URL, "key-bot", "2025-11-25")
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo"})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "{}" {
		t.Fatalf("%v %+v", err, res)
	}
	got := calls.seen[len(calls.seen)-1]
	if got.Via != "mcp" || got.MCPRequestID == "" || got.SessionID != cs.ID() || got.Identity.Principal != "bot" || got.CallID != "" {
		t.Fatalf("request %+v", got)
	}
}

// Without auth.jwt.audience no JWT is bound to this gateway: /mcp
// refuses JWTs and still admits API keys; with it, both.
func TestJWTsNeedTheGatewaysAudience(t *testing.T) {
	off, _ := serve(t, Options{})
	if _, err := connect(t, off.URL, "jwt-dana", ""); err == nil {
		t.Error("a JWT was admitted with no audience configured")
	}
	if _, err := connect(t, off.URL, "key-bot", ""); err != nil {
		t.Errorf("API key: %v", err)
	}
	on, _ := serve(t, Options{JWTAudience: "https://gw/mcp"})
	if _, err := connect(t, on.URL, "jwt-dana", ""); err != nil {
		t.Errorf("JWT with an audience configured: %v", err)
	}
}

func TestCheckBody(t *testing.T) {
	call := `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo"}}`
	for _, c := range []struct {
		name, body, method, mname string
		status                    int
		id                        string
	}{
		{"plain", call, "", "", 0, `"a"`},
		{"matching headers", call, "tools/call", "echo", 0, `"a"`},
		{"other method", call, "tools/list", "", 400, `"a"`},
		{"other name", call, "tools/call", "rm", 400, `"a"`},
		{"name without method header", call, "", "rm", 400, `"a"`},
		{"not json", `{"jsonrpc"`, "", "", 400, ""},
		{"empty", ``, "", "", 400, ""},
		{"string", `"x"`, "", "", 400, ""},
		{"batch with headers", `[` + call + `]`, "tools/call", "", 400, ""},
		{"batch", `[` + call + `]`, "", "", 0, ""},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, "", "", 0, ""},
	} {
		h := http.Header{}
		if c.method != "" {
			h.Set("Mcp-Method", c.method)
		}
		if c.mname != "" {
			h.Set("Mcp-Name", c.mname)
		}
		id, status, _, _ := checkBody(h, []byte(c.body))
		if status != c.status || string(id) != c.id {
			t.Errorf("%s: status %d id %s, want %d %s", c.name, status, id, c.status, c.id)
		}
	}
}

func TestLongRequestIDsAreRecordedAsDigests(t *testing.T) {
	short := json.RawMessage(`"req-1"`)
	long := json.RawMessage(`"` + strings.Repeat("x", 500) + `"`)
	if got := auditableID(short); got != `"req-1"` {
		t.Errorf("short id: %s", got)
	}
	if got := auditableID(long); !strings.HasPrefix(got, "sha256:") || len(got) != 71 {
		t.Errorf("long id: %s", got)
	}
}

// An idle session ends: its id finds nothing afterwards.
func TestIdleSessionsEnd(t *testing.T) {
	srv, _ := serve(t, Options{SessionTimeout: 100 * time.Millisecond})
	cs, err := connect(t, srv.URL, "key-bot", "2025-11-25")
	if err != nil {
		t.Fatal(err)
	}
	body := `{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{}}`
	post := func() int {
		req, _ := http.NewRequest("POST", srv.URL+Path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer key-bot")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := post(); st != 200 {
		t.Fatalf("live session: %d", st)
	}
	// Each probe is a request that would keep the session alive, so
	// probes are spaced well beyond the timeout.
	for i := 0; ; i++ {
		time.Sleep(400 * time.Millisecond)
		if post() == 404 {
			break
		}
		if i == 10 {
			t.Fatal("the idle session never ended")
		}
	}
}

// Over stdio each tools/call's JSON-RPC id reaches the service as over
// /mcp: its JSON text, a long one as a digest; a value the client puts
// under the gateway's _meta key is replaced, never recorded.
func TestStdioCallsCarryTheirRequestIDs(t *testing.T) {
	calls := &fakeCalls{}
	s := New(Options{Calls: calls, Auth: fakeAuth{}})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- s.ServeStdio(context.Background(), "key-bot", inR, outW); outW.Close() }()
	out := bufio.NewScanner(outR)
	out.Buffer(make([]byte, 1<<20), 1<<20)
	send := func(line string) {
		t.Helper()
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	await := func(id string) string {
		t.Helper()
		for out.Scan() {
			var m map[string]json.RawMessage
			if json.Unmarshal(out.Bytes(), &m) == nil && string(m["id"]) == id {
				return out.Text()
			}
		}
		t.Fatalf("no response to %s", id)
		return ""
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	await("1")
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	long := `"` + strings.Repeat("x", 200) + `"`
	for _, c := range []struct{ id, params, want string }{
		{`7`, `{"name":"echo"}`, `7`},
		{`"a<b>&"`, `{"name":"echo","_meta":{"io.toolgate/mcp_request_id":"fake","io.toolgate/mcp_request_id":"fake2"}}`, `"a<b>&"`},
		{long, `{"name":"echo","_meta":{"io.toolgate/mcp_request_id":"fake"}}`, auditableID(json.RawMessage(long))},
		{`9`, `{"_meta":null,"name":"echo"}`, `9`},
	} {
		send(`{"jsonrpc":"2.0","id":` + c.id + `,"method":"tools/call","params":` + c.params + `}`)
		if resp := await(c.id); !strings.Contains(resp, `"result"`) {
			t.Fatalf("%s: %s", c.id, resp)
		}
		calls.mu.Lock()
		got := calls.seen[len(calls.seen)-1]
		calls.mu.Unlock()
		if got.MCPRequestID != c.want || got.Via != Via {
			t.Errorf("id %s: recorded %q, want %q", c.id, got.MCPRequestID, c.want)
		}
	}
	// A _meta that is no object is not stamped, and the call never runs.
	calls.mu.Lock()
	n := len(calls.seen)
	calls.mu.Unlock()
	send(`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"echo","_meta":"io.toolgate/mcp_request_id"}}`)
	if resp := await("11"); !strings.Contains(resp, `"error"`) {
		t.Fatalf("_meta no object: %s", resp)
	}
	calls.mu.Lock()
	if len(calls.seen) != n {
		t.Fatalf("a call whose _meta is no object ran: %+v", calls.seen[n:])
	}
	calls.mu.Unlock()
	// What the SDK's stdio connection refuses, it still refuses: the
	// stream ends at trailing data on a line.
	send(`{"jsonrpc":"2.0","id":10,"method":"tools/list"} x`)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "trailing data") {
			t.Fatalf("the stream ended with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("trailing data did not end the stream")
	}
}

// Batches and messages that are no requests pass with their meaning
// intact; only tools/call requests are stamped.
func TestStampLeavesOtherMessagesTheirMeaning(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"jsonrpc":"2.0","id":1,"result":{}}`, `{"jsonrpc":"2.0","id":1,"result":{}}`},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.toolgate/mcp_request_id":"x"}}}`, `{"id":2,"jsonrpc":"2.0","method":"tools/list","params":{"_meta":{"io.toolgate/mcp_request_id":"x"}}}`},
		{`[{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"e"}}]`, `[{"id":3,"jsonrpc":"2.0","method":"tools/call","params":{"_meta":{"io.toolgate/mcp_request_id":"3"},"name":"e"}}]`},
		{`{"jsonrpc":"2.0","method":"tools/call","params":{"name":"e","_meta":{"io.toolgate/mcp_request_id":"x"}}}`, `{"jsonrpc":"2.0","method":"tools/call","params":{"_meta":{},"name":"e"}}`},
		{`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"e","_meta":"no object"}}`, `{"id":4,"jsonrpc":"2.0","method":"tools/call","params":{"name":"e","_meta":"no object"}}`},
		{`"text"`, `"text"`},
	} {
		if got := string(stamp(json.RawMessage(c.in))); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.in, got, c.want)
		}
	}
}
