package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/command"
	"github.com/toolgate/toolgate/internal/sandbox"
)

// The test binary re-executed with this variable set is the gateway
// binary: `gateway <args>` with the real stdin and stdout.
const execMainEnv = "TOOLGATE_TEST_EXEC_MAIN"

func TestMain(m *testing.M) {
	// The confinement helper re-executes the test binary, as it does the
	// gateway binary (the walk-through's gateway builds jails).
	if len(os.Args) > 1 && os.Args[1] == sandbox.SubCommand {
		os.Exit(sandbox.Main(os.Args[2:], sandbox.Payloads{command.PayloadName: command.RunInJail}))
	}
	if os.Getenv(execMainEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

const stdioAudience = "https://toolgate.test/mcp"

// `gateway mcp stdio` speaks MCP on stdin/stdout as the holder of the
// token file: the Go SDK's client starts it as a process (as an IDE
// would), lists the caller's tools and calls them through policy and
// audit; a token without the gateway's audience is refused before the
// client hears anything.
func TestMCPStdioServesOneLocalClient(t *testing.T) {
	file := writeConfig(t, strings.Replace(goodConfig, "auth: {jwt: {hs256_secret_file: secret}}",
		"auth: {jwt: {hs256_secret_file: secret, audience: \""+stdioAudience+"\"}}", 1))
	dir := filepath.Dir(file)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "ws", "guide.md"), []byte("hello from acme\n"), 0o644))
	must(os.MkdirAll(filepath.Join(dir, "ws", "secrets"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "ws", "secrets", "db.env"), []byte("PASSWORD=x\n"), 0o644))
	_, err := auth.EnsureHS256Secret(filepath.Join(dir, "secret"))
	must(err)
	secret, err := auth.ReadHS256Secret(filepath.Join(dir, "secret"))
	must(err)
	mint := func(aud string) string {
		tok, err := auth.MintHS256(secret, auth.MintClaims{Tenant: "acme", Subject: "dana", Roles: []string{"developer"}, Audience: aud, TTL: time.Hour}, time.Now())
		must(err)
		f := filepath.Join(dir, "token-"+strings.ReplaceAll(strings.ReplaceAll(aud, "/", "_"), ":", "_"))
		must(os.WriteFile(f, []byte(tok+"\n"), 0o600))
		return f
	}
	gateway := func(tokenFile string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "mcp", "stdio", "--config", file, "--token-file", tokenFile)
		cmd.Env = append(os.Environ(), execMainEnv+"=1")
		return cmd
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "ide", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: gateway(mint(stdioAudience))}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "read-file" {
		t.Fatalf("tools/list: %v %+v", err, tools)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read-file", Arguments: map[string]any{"path": "guide.md"}})
	if err != nil || res.IsError || res.Meta["io.toolgate/outcome"] != "ok" || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "hello from acme") {
		t.Fatalf("allowed call: %v %+v", err, res)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "read-file", Arguments: map[string]any{"path": "secrets/db.env"}})
	if err != nil || !res.IsError || res.Meta["io.toolgate/outcome"] != "denied" || strings.Contains(res.Content[0].(*mcp.TextContent).Text, "PASSWORD") {
		b, _ := json.Marshal(res)
		t.Fatalf("denied call: %v %s", err, b)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "teleport", Arguments: map[string]any{}})
	if err != nil || !res.IsError || res.Content[0].(*mcp.TextContent).Text != "tool unavailable" {
		t.Fatalf("unknown tool: %v %+v", err, res)
	}
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}

	// A token for another audience never gets a session.
	cmd := gateway(mint("https://elsewhere.example/mcp"))
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}` + "\n")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "does not verify") {
		t.Fatalf("wrong audience: %v, stdout %q, stderr %q", err, stdout.String(), stderr.String())
	}
}
