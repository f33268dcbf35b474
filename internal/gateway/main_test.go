package gateway

import (
	"flag"
	"os"
	"strconv"
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
	raiseParallel()
	os.Exit(m.Run())
}

// parallelE2E is how many end-to-end tests run at once unless -parallel
// says otherwise: they mostly wait (fsync, processes, jails, the network
// on loopback), so more than GOMAXPROCS (go test's default) at once keeps
// the two cores busy instead of idle. Tests that measure the machine, look
// at every process, swap a package variable, set environment variables or
// look for leaked goroutines stay serial (Go runs serial tests first).
const parallelE2E = 4

func raiseParallel() {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", strconv.Itoa(parallelE2E))
	}
}
