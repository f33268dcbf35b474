package main

import (
	"context"
	encjson "encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/tools/mcptool"
)

func TestMCPPinWritesTheLockBesideTheConfig(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	ok := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return nil, nil }
	srv.AddTool(&mcp.Tool{Name: "search", Description: "Search.", InputSchema: encjson.RawMessage(`{"type":"object"}`)}, ok)
	srv.AddTool(&mcp.Tool{Name: "bad", Description: "External ref.", InputSchema: encjson.RawMessage(`{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`)}, ok)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer hs.Close()

	cfg := strings.Replace(goodConfig, "tools: {builtin: [read-file]}\n",
		"tools:\n  builtin: [read-file]\n  mcp: [{name: notes, url: \""+hs.URL+"\"}]\n", 1)
	cfg = strings.Replace(cfg, "auth: {jwt: {hs256_secret_file: secret}}",
		"auth: {jwt: {hs256_secret_file: secret}, assertion: {signing_key_file: assertion.pem}}", 1)
	file := writeConfig(t, cfg)

	code, out, errOut := runCLI(t, "mcp", "pin", "--config", file)
	if code != 0 || !strings.Contains(out, "pinned 1 tool(s) of notes") || !strings.Contains(errOut, "not pinned: notes/bad") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	lock, err := mcptool.ReadLock(filepath.Join(filepath.Dir(file), "mcp.lock.json"))
	if err != nil || !strings.HasPrefix(lock.Pins("notes")["search"], "sha256:") || len(lock.Pins("notes")) != 1 {
		t.Fatalf("lock %+v %v", lock, err)
	}

	// An unreachable upstream fails the command and writes nothing.
	hs.Close()
	os.Remove(filepath.Join(filepath.Dir(file), "mcp.lock.json"))
	code, _, errOut = runCLI(t, "mcp", "pin", "--config", file)
	if code != 1 || !strings.Contains(errOut, "tools.mcp[0] (notes)") {
		t.Fatalf("unreachable: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(file), "mcp.lock.json")); !os.IsNotExist(err) {
		t.Fatalf("a lock was written: %v", err)
	}
	if code, _, errOut := runCLI(t, "mcp", "pin", "--config", writeConfig(t, goodConfig)); code != 2 || !strings.Contains(errOut, "no MCP upstream") {
		t.Fatalf("no upstreams: exit %d: %s", code, errOut)
	}
}
