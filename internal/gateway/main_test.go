package gateway

import (
	"os"
	"testing"

	"github.com/toolgate/toolgate/internal/command"
	"github.com/toolgate/toolgate/internal/sandbox"
)

// TestMain lets the test binary act as the confinement helper, as the
// gateway binary does: commands started by the shell tool re-execute
// os.Executable() with the sandbox-exec sub-command. With
// mcpTestServerArg it is a stdio MCP server (mcp_e2e_test.go); with
// envServe a gateway serving a config (users_test.go).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == sandbox.SubCommand {
		os.Exit(sandbox.Main(os.Args[2:], sandbox.Payloads{command.PayloadName: command.RunInJail}))
	}
	if cfg := os.Getenv(envServe); cfg != "" {
		os.Exit(serveForTest(cfg))
	}
	if len(os.Args) > 1 && os.Args[1] == mcpTestServerArg {
		os.Exit(runStdioMCPServer())
	}
	os.Exit(m.Run())
}
