package gateway

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The attacks of issue 12 that the argument scan, the file resources and
// the default pack answer (the command jail is tested on its own), through
// the real HTTP server.

const acmeSecret = "PASSWORD=acme-secret\n"

func (h *harness) secretUnchanged() {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.dir, "ws/acme/secrets/db.env"))
	if err != nil || string(b) != acmeSecret {
		h.t.Fatalf("secrets/db.env changed: %q %v", b, err)
	}
}

func (h *harness) bashCall(token, cmd, cwd string) response {
	h.t.Helper()
	args := map[string]any{"command": cmd}
	if cwd != "" {
		args["cwd"] = cwd
	}
	b, _ := json.Marshal(map[string]any{"arguments": args, "session_id": "s1"})
	return h.call(token, "bash", string(b))
}

func TestCommandFileAttacksAgainstTheDefaultPack(t *testing.T) {
	t.Parallel()
	h := start(t, withAllTools, func(s *setup) {
		s.files = map[string]string{"acme/README.md": "b\na\n"}
	})
	dev := h.token("acme", "alice", "developer")
	var many strings.Builder
	many.WriteString("cat")
	for i := range 70 {
		fmt.Fprintf(&many, " x%d", i)
	}
	many.WriteString(" secrets/db.env")

	type attack struct{ name, cmd, cwd, outcome, content string }
	run := func(attacks []attack) {
		for _, tc := range attacks {
			t.Run(tc.name, func(t *testing.T) {
				r := h.bashCall(dev, tc.cmd, tc.cwd)
				if r.str("outcome") != tc.outcome || !strings.Contains(r.str("content"), tc.content) {
					t.Fatalf("got %s %q, want %s containing %q", r.str("outcome"), r.str("content"), tc.outcome, tc.content)
				}
				if strings.Contains(string(r.raw), "acme-secret") {
					t.Fatalf("the secret leaked: %s", r.raw)
				}
			})
		}
	}
	run([]attack{
		{"70 arguments then a protected file", many.String(), "", "invalid_arguments", "more than 64 paths"},
		{"sort -oFILE into a protected file", "sort -osecrets/db.env README.md", "", "denied", "secrets/db.env is not allowed: the path is protected"},
		{"sort -o FILE into a protected file", "sort -o secrets/db.env README.md", "", "denied", "secrets/db.env is not allowed: the path is protected"},
		{"sort --output= skips no approval", "sort --output=release/VERSION README.md", "", "approval_required", "approval required"},
		{"sort --output FILE skips no approval", "sort --output release/VERSION README.md", "", "approval_required", "approval required"},
		{"sort -o into a path no write glob covers", "sort -o README.md README.md", "", "denied", "write to README.md is not allowed"},
		{"a protected working folder", "ls", "secrets", "denied", "access to secrets is not allowed: the path is protected"},
		{"a protected working folder through cat", "cat db.env", "secrets", "denied", "the path is protected"},
		{"sort -o into a write glob still works", "sort -o notes/sorted README.md", "", "ok", "[exit code: 0]"},
	})
	if b, err := os.ReadFile(filepath.Join(h.dir, "ws/acme/notes/sorted")); err != nil || string(b) != "a\nb\n" {
		t.Fatalf("sort -o into notes/: %q %v", b, err)
	}
	if h.release() != "1\n" {
		t.Fatal("release/VERSION was written without approval")
	}

	// notes/innocent becomes another name of secrets/db.env: every tool
	// that would read or write it is denied.
	if err := os.Link(filepath.Join(h.dir, "ws/acme/secrets/db.env"), filepath.Join(h.dir, "ws/acme/notes/innocent")); err != nil {
		t.Skipf("no hard links: %v", err)
	}
	run([]attack{
		{"cat of a hard link to a protected file", "cat notes/innocent", "", "denied", "notes/innocent is not allowed: the file has 2 hard links"},
		{"sort -o into a hard link", "sort -o notes/innocent README.md", "", "denied", "notes/innocent is not allowed: the file has 2 hard links"},
	})
	for _, tc := range []struct{ tool, args string }{
		{"read-file", `{"path":"notes/innocent"}`},
		{"grep", `{"pattern":"PASS","path":"notes/innocent"}`},
		{"write-file", `{"path":"notes/innocent","content":"pwned"}`},
		{"edit-file", `{"path":"notes/innocent","old_string":"PASSWORD","new_string":"pwned"}`},
	} {
		r := h.call(dev, tc.tool, `{"arguments":`+tc.args+`,"session_id":"s1"}`)
		if r.str("outcome") != "denied" || !strings.Contains(r.str("content"), "notes/innocent is not allowed: the file has 2 hard links") ||
			strings.Contains(string(r.raw), "acme-secret") {
			t.Fatalf("%s through a hard link: %s", tc.tool, r.raw)
		}
	}
	h.secretUnchanged()
	h.verify("acme")
}

// TestApprovedWriteSwappedForAHardLinkIsRefused: alice's write to
// release/VERSION waits for a human; meanwhile release/VERSION becomes a
// hard link to secrets/db.env. The approved call does not write through
// it: tool_error, the secret is unchanged.
func TestApprovedWriteSwappedForAHardLinkIsRefused(t *testing.T) {
	t.Parallel()
	h := start(t)
	alice := h.token("acme", "alice", "developer")
	bob := h.token("acme", "bob", "approver")
	held := h.held(alice, "pwned")
	id, callID := approvalID(t, held), held.str("call_id")

	target := filepath.Join(h.dir, "ws/acme/release/VERSION")
	must(t, os.Remove(target))
	if err := os.Link(filepath.Join(h.dir, "ws/acme/secrets/db.env"), target); err != nil {
		t.Skipf("no hard links: %v", err)
	}
	ok := h.do("POST", "/v1/approvals/"+id+"/approve", bob, []byte(`{"comment":"release"}`))
	if ok.status != 200 || ok.str("outcome") != "tool_error" {
		t.Fatalf("approve: %d %s", ok.status, ok.raw)
	}
	p := h.do("GET", "/v1/calls/"+callID, alice, nil)
	if p.status != 200 || p.str("outcome") != "tool_error" || p.body["is_error"] != true || strings.Contains(string(p.raw), "acme-secret") {
		t.Fatalf("poll after approval: %d %s", p.status, p.raw)
	}
	// The approval re-prepares the held call: the target now carries
	// links: 2, so its request document is not the approved one and
	// nothing runs (write-file's own run-time check is the second line,
	// for a swap between that re-prepare and the write).
	var why string
	for _, e := range h.events("acme", "call_id="+callID) {
		if e["phase"] == "result" {
			r, _ := e["result"].(map[string]any)
			why, _ = r["error"].(string)
		}
	}
	if !strings.Contains(why, "changed between the request and its approval") {
		t.Fatalf("the result event does not say the held call changed: %q", why)
	}
	h.secretUnchanged()
	h.verify("acme")
}

// TestGitDoesNotReadTheGatewaysRepository: the gateway's own folder (its
// config, keys, audit database) is a git repository enclosing the
// workspaces; git log in a workspace must not show it.
func TestGitDoesNotReadTheGatewaysRepository(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	h := start(t, withAllTools)
	gitIn := func(args ...string) {
		cmd := exec.Command("git", append([]string{"-C", h.dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+h.dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	gitIn("init", "-q")
	gitIn("add", "gateway.yaml", "secret")
	gitIn("commit", "-qm", "gateway-commit-marker")
	dev := h.token("acme", "alice", "developer")
	for _, cmd := range []string{"git log", "git status", "git show HEAD:secret"} {
		r := h.bashCall(dev, cmd, "")
		if r.str("outcome") != "ok" || !strings.Contains(r.str("content"), "not a git repository") ||
			strings.Contains(r.str("content"), "gateway-commit-marker") || strings.Contains(r.str("content"), "gateway.yaml") {
			t.Fatalf("%s: %s", cmd, r.raw)
		}
	}
}
