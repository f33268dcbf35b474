package gateway

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioClient is a raw MCP client of the gateway's stdio front door
// (`gateway mcp stdio` without the process): it writes JSON-RPC lines
// and reads the answers.
type stdioClient struct {
	t   *testing.T
	in  *io.PipeWriter
	out *bufio.Scanner
}

func (h *harness) stdio(t *testing.T, token string) *stdioClient {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.g.front.ServeStdio(ctx, token, inR, outW); outW.Close() }()
	t.Cleanup(func() {
		inW.Close()
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("the stdio server did not end")
		}
	})
	sc := bufio.NewScanner(outR)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	return &stdioClient{t: t, in: inW, out: sc}
}

func (c *stdioClient) send(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

// response reads lines until the response to id (its JSON text).
func (c *stdioClient) response(id string) map[string]any {
	c.t.Helper()
	for c.out.Scan() {
		var m map[string]json.RawMessage
		if json.Unmarshal(c.out.Bytes(), &m) != nil {
			c.t.Fatalf("not JSON: %s", c.out.Bytes())
		}
		if string(m["id"]) != id || m["method"] != nil {
			continue
		}
		var out map[string]any
		must(c.t, json.Unmarshal(c.out.Bytes(), &out))
		return out
	}
	c.t.Fatalf("no response to %s: %v", id, c.out.Err())
	return nil
}

// Over stdio the audit events of a call record its JSON-RPC id as over
// /mcp: the id's JSON text, a long one as its SHA-256; whatever the
// client puts under the gateway's _meta key changes nothing.
func TestMCPStdioRecordsRequestIDs(t *testing.T) {
	t.Parallel()
	h := start(t, withAudience)
	c := h.stdio(t, h.audToken(mcpAudience, "acme", "dana", "developer"))
	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if r := c.response("1"); r["result"] == nil {
		t.Fatalf("initialize: %v", r)
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	long := `"` + strings.Repeat("r", 300) + `"`
	sum := sha256.Sum256([]byte(long))
	for _, tc := range []struct{ id, meta, want string }{
		{`7`, `{}`, `7`},
		{`"call-7"`, `{"io.toolgate/mcp_request_id":"chosen-by-the-client","progressToken":"p"}`, `"call-7"`},
		{long, `{"io.toolgate/mcp_request_id":"chosen"}`, "sha256:" + hex.EncodeToString(sum[:])},
		{`8`, `null`, `8`},
	} {
		c.send(`{"jsonrpc":"2.0","id":` + tc.id + `,"method":"tools/call","params":{"name":"read-file","arguments":{"path":"docs/guide.md"},"_meta":` + tc.meta + `}}`)
		r := c.response(tc.id)
		res, _ := r["result"].(map[string]any)
		meta, _ := res["_meta"].(map[string]any)
		callID, _ := meta["io.toolgate/call_id"].(string)
		if meta["io.toolgate/outcome"] != "ok" || callID == "" {
			t.Fatalf("tools/call %s: %v", tc.id, r)
		}
		evs := h.events("acme", "call_id="+callID)
		if len(evs) != 2 {
			t.Fatalf("%d events for call %s", len(evs), callID)
		}
		for _, ev := range evs {
			if ev["via"] != "mcp" || ev["mcp_request_id"] != tc.want {
				t.Errorf("id %s: event %v: via %v, mcp_request_id %v, want %s", tc.id, ev["phase"], ev["via"], ev["mcp_request_id"], tc.want)
			}
		}
	}
	h.verify("acme")
}

// A stdio client that can elicit is asked the question too, whichever
// revision it negotiates.
func TestMCPStdioAskUserElicits(t *testing.T) {
	t.Parallel()
	h := start(t, withAudience, withAskUser)
	token := h.audToken(mcpAudience, "acme", "alice", "developer")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	u := &user{reply: answering("yes")}
	for _, rev := range []string{"2025-11-25", ""} {
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		done := make(chan error, 1)
		go func() { done <- h.g.front.ServeStdio(ctx, token, inR, outW); outW.Close() }()
		client := mcp.NewClient(&mcp.Implementation{Name: "ide", Version: "1"}, &mcp.ClientOptions{ElicitationHandler: u.handle})
		cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, &mcp.ClientSessionOptions{ProtocolVersion: rev})
		if err != nil {
			t.Fatalf("%q: connect: %v", rev, err)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask-user", Arguments: map[string]any{"question": "Ship it?", "options": []string{"yes", "no"}}})
		if err != nil || res.Meta["io.toolgate/outcome"] != "ok" || len(textOf(res)) != 1 || textOf(res)[0] != "yes" {
			t.Fatalf("%q (negotiated %s): %v %+v", rev, cs.InitializeResult().ProtocolVersion, err, res)
		}
		t.Logf("%q negotiated %s", rev, cs.InitializeResult().ProtocolVersion)
		cs.Close()
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatal("the stdio server did not end")
		}
	}
	if n := len(u.questions()); n != 2 {
		t.Fatalf("the user was asked %d times", n)
	}
}
