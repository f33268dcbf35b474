package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// A gateway that has served and closed leaves no goroutine behind: its
// background work (policy and shadow watchers, retention, held-call
// expiry, key pruning, MCP upstream refreshes, the pprof listener) runs
// under one group that Serve stops and waits for, and Close waits for
// what the pipeline and the jailer started (key-write retries, cgroup
// removals) before it closes the stores they use.
func TestClosedGatewayLeavesNoGoroutineBehind(t *testing.T) {
	t.Run("commands, retention, shadow policy, pprof", func(t *testing.T) {
		before := goleak.IgnoreCurrent()
		shadow := filepath.Join(t.TempDir(), "shadow")
		must(t, os.CopyFS(shadow, os.DirFS("../../policies")))
		h := start(t, withAllTools, func(s *setup) {
			s.policyYAML = "  shadow: " + shadow + "\n"
			s.auditYAML = "  driver: sqlite\n  dsn: audit.db\n  retention: 24h\n"
			s.extraYAML = "debug:\n  pprof_listen: 127.0.0.1:0\n"
		})
		dev := h.token("acme", "alice", "developer")
		if r := h.bashCall(dev, "echo hello > notes/hello.txt; cat notes/hello.txt", ""); r.str("outcome") != "ok" || !strings.Contains(r.str("content"), "hello") {
			t.Fatalf("bash: %s", r.raw)
		}
		if r := h.call(dev, "read-file", `{"arguments":{"path":"docs/guide.md"}}`); r.str("outcome") != "ok" {
			t.Fatalf("read-file: %s", r.raw)
		}
		closeAndFindLeaks(t, h, before)
	})
	t.Run("an MCP upstream in the jail", func(t *testing.T) {
		skipWithoutJail(t)
		before := goleak.IgnoreCurrent()
		self := copyOfTestBinary(t)
		h := start(t, func(s *setup) {
			withMCP("", true, "")(s)
			s.toolsYAML = strings.Replace(s.toolsYAML, "url: \n", "command: ["+self+", "+mcpTestServerArg+"]\n", 1)
			s.toolsYAML = strings.Replace(s.toolsYAML, "timeout: 3s", "timeout: 60s", 1)
		})
		dev := h.token("acme", "alice", "developer")
		if r := h.call(dev, "notes-search-notes", `{"arguments":{"query":"stdio"}}`); r.str("outcome") != "ok" {
			t.Fatalf("stdio call: %s", r.raw)
		}
		closeAndFindLeaks(t, h, before)
	})
}

// closeAndFindLeaks stops h's gateway, closes it and fails t for every
// goroutine started since before that is still there.
func closeAndFindLeaks(t *testing.T, h *harness, before goleak.Option) {
	t.Helper()
	h.stop()
	if err := h.g.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	h.client.CloseIdleConnections()
	if err := goleak.Find(before); err != nil {
		t.Fatalf("goroutines left after Close: %v", err)
	}
}

// copyOfTestBinary copies this test binary outside /tmp (a jail has a
// private /tmp, where go test builds it), to run as a stdio MCP server.
func copyOfTestBinary(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	must(t, err)
	dir, err := os.MkdirTemp("/var/tmp", "toolgate-mcp-test-")
	if err != nil {
		t.Skipf("no /var/tmp: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	self := filepath.Join(dir, "mcp-server")
	b, err := os.ReadFile(exe)
	must(t, err)
	must(t, os.WriteFile(self, b, 0o755))
	must(t, os.Chmod(dir, 0o755))
	return self
}
