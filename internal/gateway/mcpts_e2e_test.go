package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// mcpTSEnv, set by .ci/run after `npm ci` in testdata/mcpclient, makes a
// missing TypeScript client a failure instead of a skip.
const mcpTSEnv = "TOOLGATE_TEST_MCP_TS"

// The official TypeScript MCP client (@modelcontextprotocol/sdk from npm)
// sees what the Go client and REST see: the caller's tools with REST's
// names, descriptions and schemas, and each call's outcome with REST's
// strings.
func TestMCPTypeScriptClient(t *testing.T) {
	t.Parallel()
	node, dir := tsClient(t)
	h := start(t, withAudience)
	dev := h.audToken(mcpAudience, "acme", "dana", "developer")
	type call struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	calls := []call{
		{"read-file", json.RawMessage(`{"path":"docs/guide.md"}`)},
		{"read-file", json.RawMessage(`{"path":"secrets/db.env"}`)},
		{"format-disk", json.RawMessage(`{}`)},
		{"read-file", json.RawMessage(`{"path":7}`)},
		{"write-file", json.RawMessage(`{"path":"release/VERSION","content":"2"}`)},
	}
	callsJSON, _ := json.Marshal(calls)
	runTS := func(token string) (int, []byte) {
		return runTSClient(t, node, dir, h.base+"/mcp", token, string(callsJSON))
	}

	code, out := runTS(dev)
	if code != 0 {
		t.Fatalf("TypeScript client: exit %d: %s", code, out)
	}
	var got struct {
		ProtocolVersion string `json:"protocolVersion"`
		SessionID       string `json:"sessionId"`
		Tools           []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
		Results []struct {
			Content []struct {
				Type, Text string
			} `json:"content"`
			IsError bool           `json:"isError"`
			Meta    map[string]any `json:"_meta"`
		} `json:"results"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.SessionID == "" || got.ProtocolVersion == "" {
		t.Errorf("TypeScript client: protocol %q, session %q", got.ProtocolVersion, got.SessionID)
	}
	t.Logf("TypeScript client negotiated %s", got.ProtocolVersion)

	r := h.do("GET", "/v1/tools", dev, nil)
	var rest struct {
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	must(t, json.Unmarshal(r.raw, &rest))
	if len(got.Tools) != len(rest.Tools) {
		t.Fatalf("TypeScript client lists %d tools, REST %d", len(got.Tools), len(rest.Tools))
	}
	for i, tl := range got.Tools {
		if tl.Name != rest.Tools[i].Name || tl.Description != rest.Tools[i].Description || !jsonEqual(t, tl.InputSchema, rest.Tools[i].InputSchema) {
			t.Errorf("tool %d: TypeScript %s, REST %s", i, tl.Name, rest.Tools[i].Name)
		}
	}
	if len(got.Results) != len(calls) {
		t.Fatalf("%d results for %d calls: %s", len(got.Results), len(calls), out)
	}
	for i, c := range calls {
		want := h.call(dev, c.Name, `{"arguments":`+string(c.Arguments)+`}`)
		res := got.Results[i]
		if len(res.Content) == 0 || res.Content[0].Text != want.str("content") || res.IsError != want.body["is_error"] ||
			res.Meta["io.toolgate/outcome"] != want.str("outcome") {
			t.Errorf("call %d (%s): TypeScript %+v, REST %s", i, c.Name, res, want.raw)
		}
	}

	// A token for another audience: the client never connects.
	if code, out := runTS(h.audToken("https://elsewhere.example/mcp", "acme", "dana", "developer")); code != 3 {
		t.Errorf("wrong audience: exit %d: %s", code, out)
	}
}

// tsClient is node and the TypeScript client's folder; the test is
// skipped when they are not installed (failed when CI says they are).
func tsClient(t *testing.T) (node, dir string) {
	t.Helper()
	dir = filepath.Join("testdata", "mcpclient")
	node, err := exec.LookPath("node")
	if _, serr := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil || serr != nil {
		if os.Getenv(mcpTSEnv) == "1" {
			t.Fatalf("%s=1 but the TypeScript client cannot run (node: %v; node_modules: %v): run npm ci in %s", mcpTSEnv, err, serr, dir)
		}
		t.Skipf("the TypeScript MCP client is not installed: run npm ci in %s (CI sets %s=1)", dir, mcpTSEnv)
	}
	return node, dir
}

// runTSClient runs client.mjs with args and returns its exit code and
// output.
func runTSClient(t *testing.T, node, dir string, args ...string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"client.mjs"}, args...)...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out
}

// The TypeScript client (2025-11-25, with sessions) that declares form
// elicitation is asked an ask-user question during the call, and the
// call's result is its user's answer.
func TestMCPTypeScriptClientAnswersElicitation(t *testing.T) {
	t.Parallel()
	node, dir := tsClient(t)
	h := start(t, withAudience, withAskUser)
	alice := h.audToken(mcpAudience, "acme", "alice", "developer")
	calls := `[{"name":"ask-user","arguments":{"question":"Ship it?","options":["yes","no"]}}]`
	code, out := runTSClient(t, node, dir, h.base+"/mcp", alice, calls, "yes")
	if code != 0 {
		t.Fatalf("TypeScript client: exit %d: %s", code, out)
	}
	var got struct {
		Results []struct {
			Content []struct{ Type, Text string } `json:"content"`
			IsError bool                          `json:"isError"`
			Meta    map[string]any                `json:"_meta"`
		} `json:"results"`
		Elicited []struct {
			Message         string `json:"message"`
			RequestedSchema struct {
				Properties map[string]struct {
					Enum []string `json:"enum"`
				} `json:"properties"`
			} `json:"requestedSchema"`
		} `json:"elicited"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(got.Elicited) != 1 || got.Elicited[0].Message != "Ship it?" || fmt.Sprint(got.Elicited[0].RequestedSchema.Properties["answer"].Enum) != "[yes no]" {
		t.Fatalf("the user was asked: %s", out)
	}
	if len(got.Results) != 1 || len(got.Results[0].Content) != 1 || got.Results[0].Content[0].Text != "yes" || got.Results[0].IsError ||
		got.Results[0].Meta["io.toolgate/outcome"] != "ok" {
		t.Fatalf("the call's result: %s", out)
	}
	callID, _ := got.Results[0].Meta["io.toolgate/call_id"].(string)
	if steps := h.steps("acme", callID); steps != "question/answered result/awaiting_user decision/allow" {
		t.Fatalf("audit events of the call: %s", steps)
	}
}
