package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/auth"
)

// mcpAudience is auth.jwt.audience in the front door tests: a JWT is
// bound to the gateway by it.
const mcpAudience = "https://toolgate.test/mcp"

// mcpIssuer is auth.jwt.issuer there: a URL, so the metadata names it.
const mcpIssuer = "https://issuer.toolgate.test"

func withAudience(s *setup) {
	s.authYAML += "    audience: " + mcpAudience + "\n    issuer: " + mcpIssuer + "\n"
}

// audToken mints a JWT for the gateway's audience (or another).
func (h *harness) audToken(aud, tenant, sub string, roles ...string) string {
	h.t.Helper()
	tok, err := auth.MintHS256(h.secret, auth.MintClaims{Tenant: tenant, Subject: sub, Roles: roles, Audience: aud, Issuer: mcpIssuer, TTL: time.Hour}, time.Now())
	if err != nil {
		h.t.Fatal(err)
	}
	return tok
}

// bearer adds a credential (and any extra headers) to every request.
type bearer struct {
	token string
	extra http.Header
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	for k, v := range b.extra {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpConnect connects the Go SDK's client to /mcp as token's holder,
// asking for protocol revision version ("" = the SDK's newest).
func (h *harness) mcpConnect(token, version string) (*mcp.ClientSession, error) {
	tr := &mcp.StreamableClientTransport{Endpoint: h.base + "/mcp", HTTPClient: &http.Client{Transport: bearer{token: token}}, MaxRetries: -1}
	c := mcp.NewClient(&mcp.Implementation{Name: "toolgate-test", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
}

func (h *harness) mcpSession(token, version string) *mcp.ClientSession {
	h.t.Helper()
	cs, err := h.mcpConnect(token, version)
	if err != nil {
		h.t.Fatalf("connect /mcp (%q): %v", version, err)
	}
	h.t.Cleanup(func() { cs.Close() })
	return cs
}

func textOf(r *mcp.CallToolResult) []string {
	var out []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return out
}

// The revisions the front door serves: sessionless 2026-07-28 and the
// session-based ones before it.
var mcpRevisions = []string{"2026-07-28", "2025-11-25", "2025-06-18"}

func TestMCPToolsListIsGetV1ToolsForTheCaller(t *testing.T) {
	t.Parallel()
	h := start(t, withAudience)
	for _, rev := range mcpRevisions {
		for _, who := range [][]string{{"acme", "dana", "developer"}, {"acme", "vera", "viewer"}, {"globex", "gil", "developer"}} {
			tok := h.audToken(mcpAudience, who[0], who[1], who[2])
			r := h.do("GET", "/v1/tools", tok, nil)
			if r.status != 200 {
				t.Fatalf("GET /v1/tools: %d %s", r.status, r.raw)
			}
			var rest struct {
				Tools []struct {
					Name        string          `json:"name"`
					Description string          `json:"description"`
					InputSchema json.RawMessage `json:"input_schema"`
				} `json:"tools"`
			}
			must(t, json.Unmarshal(r.raw, &rest))
			cs := h.mcpSession(tok, rev)
			if got := cs.InitializeResult().ProtocolVersion; got != rev {
				t.Errorf("%s: negotiated %q", rev, got)
			}
			res, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Tools) != len(rest.Tools) || len(rest.Tools) == 0 {
				t.Fatalf("%s %v: MCP lists %d tools, REST %d", rev, who, len(res.Tools), len(rest.Tools))
			}
			for i, mt := range res.Tools {
				rt := rest.Tools[i]
				schema, _ := json.Marshal(mt.InputSchema)
				if mt.Name != rt.Name || mt.Description != rt.Description || !jsonEqual(t, schema, rt.InputSchema) {
					t.Errorf("%s %v: tool %d: MCP %s %s, REST %s %s", rev, who, i, mt.Name, schema, rt.Name, rt.InputSchema)
				}
			}
		}
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	var x, y any
	must(t, json.Unmarshal(a, &x))
	must(t, json.Unmarshal(b, &y))
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// Every outcome reaches an MCP client with REST's strings: the content,
// isError as is_error, the outcome and ids in _meta; the audit log
// records the call as made through MCP, with its JSON-RPC id.
func TestMCPCallsHaveRESTsOutcomesAndStrings(t *testing.T) {
	t.Parallel()
	h := start(t, withAudience)
	dev := h.audToken(mcpAudience, "acme", "dana", "developer")
	viewer := h.audToken(mcpAudience, "acme", "vera", "viewer")
	cases := []struct {
		name, token, tool, args, outcome string
	}{
		{"allowed", dev, "read-file", `{"path":"docs/guide.md"}`, "ok"},
		{"denied", dev, "read-file", `{"path":"secrets/db.env"}`, "denied"},
		{"unknown", dev, "format-disk", `{}`, "unavailable"},
		{"hidden", viewer, "write-file", `{"path":"docs/x","content":"x"}`, "unavailable"},
		{"invalid", dev, "read-file", `{"path":"../outside/secret.txt"}`, "invalid_arguments"},
		{"invalid type", dev, "read-file", `{"path":7}`, "invalid_arguments"},
		{"approval", dev, "write-file", `{"path":"release/VERSION","content":"2"}`, "approval_required"},
	}
	for _, rev := range mcpRevisions {
		sessions := map[string]*mcp.ClientSession{dev: h.mcpSession(dev, rev), viewer: h.mcpSession(viewer, rev)}
		for _, c := range cases {
			t.Run(rev+"/"+c.name, func(t *testing.T) {
				rest := h.call(c.token, c.tool, `{"arguments":`+c.args+`}`)
				res, err := sessions[c.token].CallTool(context.Background(), &mcp.CallToolParams{Name: c.tool, Arguments: json.RawMessage(c.args)})
				if err != nil {
					t.Fatalf("tools/call: %v", err)
				}
				text := textOf(res)
				if rest.str("outcome") != c.outcome || res.Meta["io.toolgate/outcome"] != c.outcome {
					t.Fatalf("outcome: REST %s, MCP %v, want %s", rest.str("outcome"), res.Meta["io.toolgate/outcome"], c.outcome)
				}
				if len(text) == 0 || text[0] != rest.str("content") || res.IsError != rest.body["is_error"] {
					t.Fatalf("MCP %q isError=%v, REST %q is_error=%v", text, res.IsError, rest.str("content"), rest.body["is_error"])
				}
				if c.outcome == "approval_required" {
					id, _ := res.StructuredContent.(map[string]any)["approval_id"].(string)
					if id == "" || len(text) != 2 || text[1] != "approval_id: "+id {
						t.Fatalf("approval result does not name its approval: %q %v", text, res.StructuredContent)
					}
				}
				if strings.Contains(strings.Join(text, ""), "PASSWORD") || strings.Contains(strings.Join(text, ""), "OUTSIDE") {
					t.Fatalf("secret leaked: %q", text)
				}
				callID, _ := res.Meta["io.toolgate/call_id"].(string)
				evs := h.events("acme", "call_id="+callID)
				if len(evs) == 0 {
					t.Fatalf("no audit event for MCP call %s", callID)
				}
				for _, ev := range evs {
					if ev["via"] != "mcp" || ev["mcp_request_id"] == nil || ev["mcp_request_id"] == "" {
						t.Errorf("event %v: via %v, mcp_request_id %v", ev["id"], ev["via"], ev["mcp_request_id"])
					}
				}
				for _, ev := range h.events("acme", "call_id="+rest.str("call_id")) {
					if _, ok := ev["via"]; ok {
						t.Errorf("REST event has via %v", ev["via"])
					}
				}
			})
		}
	}
	h.verify("acme")
}

// rawMCP posts one JSON-RPC message to /mcp.
func (h *harness) rawMCP(token string, body string, header ...string) (*http.Response, []byte) {
	h.t.Helper()
	req, _ := http.NewRequest("POST", h.base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func TestMCPRefusesWhatAResourceServerMust(t *testing.T) {
	t.Parallel()
	h := start(t, withAudience)
	dev := h.audToken(mcpAudience, "acme", "dana", "developer")
	wantMeta := `Bearer resource_metadata="` + h.base + `/.well-known/oauth-protected-resource/mcp"`
	expired, err := auth.MintHS256(h.secret, auth.MintClaims{Tenant: "acme", Subject: "dana", Roles: []string{"developer"}, Audience: mcpAudience, Issuer: mcpIssuer, TTL: time.Second}, time.Now().Add(-time.Hour))
	must(t, err)
	forged, err := auth.MintHS256([]byte("not-the-gateways-secret-not-the-gateways"), auth.MintClaims{Tenant: "acme", Subject: "dana", Audience: mcpAudience, Issuer: mcpIssuer, TTL: time.Hour}, time.Now())
	must(t, err)
	for name, tok := range map[string]string{
		"no token":       "",
		"garbage":        "not-a-token",
		"forged":         forged,
		"expired":        expired,
		"wrong audience": h.audToken("https://other.example/mcp", "acme", "dana", "developer"),
		"no audience":    h.audToken("", "acme", "dana", "developer"),
	} {
		resp, body := h.rawMCP(tok, initBody)
		if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != wantMeta {
			t.Errorf("%s: %d %q %s", name, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
		}
		if name != "no token" {
			if _, err := h.mcpConnect(tok, ""); err == nil {
				t.Errorf("%s: the SDK client connected", name)
			}
		}
	}

	// The metadata document names the resource and the issuer.
	resp, body := func() (*http.Response, []byte) {
		r, err := h.client.Get(h.base + "/.well-known/oauth-protected-resource/mcp")
		must(t, err)
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return r, b
	}()
	var md map[string]any
	if resp.StatusCode != 200 || json.Unmarshal(body, &md) != nil || md["resource"] != h.base+"/mcp" ||
		fmt.Sprint(md["authorization_servers"]) != "[https://issuer.toolgate.test]" {
		t.Errorf("metadata: %d %s", resp.StatusCode, body)
	}

	// A foreign Origin is refused before anything else; the gateway's own
	// and none at all are not.
	if resp, body := h.rawMCP(dev, initBody, "Origin", "https://evil.example"); resp.StatusCode != 403 {
		t.Errorf("foreign origin: %d %s", resp.StatusCode, body)
	}
	if resp, body := h.rawMCP(dev, initBody, "Origin", h.base); resp.StatusCode != 200 {
		t.Errorf("own origin: %d %s", resp.StatusCode, body)
	}

	// Mcp-Method and Mcp-Name must agree with the body.
	call := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"read-file","arguments":{"path":"docs/guide.md"}}}`
	for name, hdr := range map[string][]string{
		"method":  {"Mcp-Method", "tools/list"},
		"name":    {"Mcp-Name", "write-file"},
		"name 26": {"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "write-file"},
	} {
		resp, body := h.rawMCP(dev, call, hdr...)
		if resp.StatusCode != 400 || !strings.Contains(string(body), "-32020") {
			t.Errorf("header mismatch (%s): %d %s", name, resp.StatusCode, body)
		}
	}
	// Garbage and oversized bodies: a precise error, nothing run.
	for name, b := range map[string]string{
		"garbage":   `{"jsonrpc":"2.0",`,
		"not rpc":   `"hello"`,
		"oversized": `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"` + strings.Repeat("a", 70000) + `"}}`,
	} {
		resp, body := h.rawMCP(dev, b)
		want := 400
		if name == "oversized" {
			want = 413
		}
		if resp.StatusCode != want {
			t.Errorf("%s: %d %s", name, resp.StatusCode, body)
		}
	}
	h.sync("acme")
	if evs := h.events("acme", "limit=1000"); len(evs) != 0 {
		t.Errorf("refused requests were audited as calls: %d events", len(evs))
	}
}

// A session id is not a credential: another principal presenting it is
// refused, and the owner's session keeps working.
func TestMCPSessionIsBoundToItsPrincipal(t *testing.T) {
	t.Parallel()
	h := start(t, withAudience)
	dana := h.audToken(mcpAudience, "acme", "dana", "developer")
	cs := h.mcpSession(dana, "2025-11-25")
	sid := cs.ID()
	if len(sid) < 20 {
		t.Fatalf("session id %q is not a random id", sid)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`
	for name, tok := range map[string]string{
		"another principal": h.audToken(mcpAudience, "acme", "mallory", "developer"),
		"another tenant":    h.audToken(mcpAudience, "globex", "dana", "developer"),
	} {
		resp, body := h.rawMCP(tok, list, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-11-25")
		if resp.StatusCode != 403 || strings.Contains(string(body), "read-file") {
			t.Errorf("%s presenting dana's session: %d %s", name, resp.StatusCode, body)
		}
	}
	// Without a credential the session id alone gets nothing.
	if resp, _ := h.rawMCP("", list, "Mcp-Session-Id", sid, "Mcp-Protocol-Version", "2025-11-25"); resp.StatusCode != 401 {
		t.Errorf("session id without a credential: %d", resp.StatusCode)
	}
	if _, err := cs.ListTools(context.Background(), nil); err != nil {
		t.Fatalf("owner's session broken: %v", err)
	}
}

// Concurrent tools/call requests of one session behave like single calls.
func TestMCPConcurrentCallsOfOneSession(t *testing.T) {
	t.Parallel()
	h := start(t, withAudience)
	dev := h.audToken(mcpAudience, "acme", "dana", "developer")
	for _, rev := range []string{"2025-11-25", "2026-07-28"} {
		cs := h.mcpSession(dev, rev)
		const n = 12
		var wg sync.WaitGroup
		errs := make(chan string, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				path, want := "docs/guide.md", "ok"
				if i%3 == 0 {
					path, want = "secrets/db.env", "denied"
				}
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "read-file", Arguments: map[string]any{"path": path}})
				if err != nil {
					errs <- err.Error()
					return
				}
				if res.Meta["io.toolgate/outcome"] != want {
					errs <- fmt.Sprintf("call %d: %v, want %s", i, res.Meta["io.toolgate/outcome"], want)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Errorf("%s: %s", rev, e)
		}
	}
	h.verify("acme")
}

func TestMCPCanBeTurnedOff(t *testing.T) {
	t.Parallel()
	h := start(t, withAudience, func(s *setup) { s.extraYAML += "mcp:\n  enabled: false\n" })
	resp, _ := h.rawMCP(h.audToken(mcpAudience, "acme", "dana", "developer"), initBody)
	if resp.StatusCode != 404 {
		t.Fatalf("/mcp with mcp.enabled false: %d", resp.StatusCode)
	}
}

// limits.tenant_rate is one rate per tenant across both front doors:
// what REST used up, /mcp cannot use again; the refusal comes before the
// body is read, with Retry-After, and is not audited.
func TestMCPSharesTheTenantRateWithREST(t *testing.T) {
	t.Parallel()
	h := start(t, withAudience, func(s *setup) { s.limitYAML = "  tenant_rate: 0.001\n  tenant_burst: 2\n" })
	dev := h.audToken(mcpAudience, "acme", "dana", "developer")
	for range 2 {
		if r := h.do("GET", "/v1/tools", dev, nil); r.status != 200 {
			t.Fatalf("within the burst: %d", r.status)
		}
	}
	resp, body := h.rawMCP(dev, initBody)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "-32029") {
		t.Fatalf("/mcp after REST used the burst: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	// Another tenant is not affected.
	if resp, body := h.rawMCP(h.audToken(mcpAudience, "globex", "gil", "developer"), initBody); resp.StatusCode != 200 {
		t.Fatalf("another tenant: %d %s", resp.StatusCode, body)
	}
}

// DNS rebinding: a request that reached the loopback listener naming a
// foreign Host is refused, unless that host is the configured
// mcp.resource's (a reverse proxy on the same machine).
func TestMCPRefusesAForeignHostOnLoopback(t *testing.T) {
	t.Parallel()
	h := start(t, withAudience, func(s *setup) { s.extraYAML += "mcp:\n  resource: https://gw.example.com/mcp\n" })
	dev := h.audToken(mcpAudience, "acme", "dana", "developer")
	for host, want := range map[string]int{"evil.example": 403, "gw.example.com": 200, "localhost": 200} {
		req, _ := http.NewRequest("POST", h.base+"/mcp", strings.NewReader(initBody))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+dev)
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// MCP client → /mcp → MCP upstream: the upstream receives the gateway's
// signed assertion for the caller and never the caller's token; the
// call's events record both the front door and the pinned tool.
func TestMCPThroughTheFrontDoorToAnMCPUpstream(t *testing.T) {
	t.Parallel()
	m := newTestMCPServer()
	url := m.serve(t)
	h := start(t, withMCP(url, false, "      pin: false\n"), func(s *setup) {
		s.authYAML = "    audience: " + mcpAudience + "\n    issuer: " + mcpIssuer + "\n" + s.authYAML
	})
	dev := h.audToken(mcpAudience, "acme", "dana", "developer")
	cs := h.mcpSession(dev, "")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "notes-search-notes", Arguments: map[string]any{"query": "plan"}})
	if err != nil || res.IsError || textOf(res)[0] != "found plan (limit 5)" {
		t.Fatalf("%v %+v", err, res)
	}
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "notes-whoami", Arguments: map[string]any{}})
	if err != nil || res.IsError || !strings.HasPrefix(textOf(res)[0], "dana@acme ") {
		t.Fatalf("whoami: %v %q", err, textOf(res))
	}
	res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "notes-search-notes", Arguments: map[string]any{"query": "forbidden"}})
	if err != nil || !res.IsError || textOf(res)[0] != "that query is not allowed" {
		t.Fatalf("denied: %v %q", err, textOf(res))
	}
	calls := m.calls()
	if len(calls) != 2 {
		t.Fatalf("the upstream saw %d calls, want 2 (the denied one never reaches it)", len(calls))
	}
	for _, c := range calls {
		if c.assertion == "" || c.assertion == dev || c.authorization != "" || strings.Contains(c.assertion, dev) {
			t.Fatalf("upstream received assertion %q, authorization %q", c.assertion, c.authorization)
		}
	}
}

// ask-user through MCP: an awaiting_user result that names its question,
// which the platform answers over REST and reads as the call's result.
func TestMCPAskUserNamesItsQuestion(t *testing.T) {
	t.Parallel()
	h := start(t, withAudience, withAskUser)
	alice := h.audToken(mcpAudience, "acme", "alice", "developer")
	cs := h.mcpSession(alice, "2025-11-25")
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask-user", Arguments: map[string]any{"question": "Which branch?"}})
	if err != nil {
		t.Fatal(err)
	}
	text := textOf(res)
	qid, _ := res.StructuredContent.(map[string]any)["question_id"].(string)
	if res.IsError || res.Meta["io.toolgate/outcome"] != "awaiting_user" || len(text) != 2 || text[0] != "awaiting user" || qid == "" || text[1] != "question_id: "+qid {
		t.Fatalf("ask-user over MCP: %q %+v", text, res)
	}
	if r := h.answer(alice, qid, "main"); r.status != 200 || r.str("status") != "answered" {
		t.Fatalf("answer: %d %s", r.status, r.raw)
	}
	callID, _ := res.Meta["io.toolgate/call_id"].(string)
	if p := h.do("GET", "/v1/calls/"+callID, alice, nil); p.status != 200 || p.str("content") != "main" {
		t.Fatalf("the call's result: %d %s", p.status, p.raw)
	}
}
