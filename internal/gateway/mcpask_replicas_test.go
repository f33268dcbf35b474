package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/pgtest"
)

// askReplicas starts two gateways on one PostgreSQL database, sharing the
// checkpoint key and the HS256 secret as replicas do, with the
// requestState key files keyA and keyB (the same file or not).
func askReplicas(t *testing.T, keyA, keyB string) (a, b *harness) {
	t.Helper()
	dsn := pgtest.DSN(t)
	shared := t.TempDir()
	replica := func(key string, more ...func(*setup)) *harness {
		return start(t, append([]func(*setup){withAudience, withAskUser, func(s *setup) {
			s.auditYAML = fmt.Sprintf("  driver: postgres\n  dsn: %q\n  signing_key_file: %q\n", dsn, filepath.Join(shared, "audit-signing.key"))
			s.extraYAML += fmt.Sprintf("mcp:\n  request_state_key_file: %q\n", key)
		}}, more...)...)
	}
	a = replica(keyA)
	b = replica(keyB, func(s *setup) {
		s.beforeNew = func(t testing.TB, cfg *config.Config) {
			must(t, os.WriteFile(cfg.Auth.JWT.HS256SecretFile, a.secret, 0o600))
		}
	})
	return a, b
}

// askAt makes an ask-user call at h from a 2026-07-28 client that fulfils
// input requests itself (multi round-trip off) and returns the
// input_required result's call id and requestState.
func askAt(t *testing.T, h *harness, token string, args map[string]any) (callID, state string) {
	t.Helper()
	cs := h.mcpSessionWith(token, "2026-07-28", &mcp.ClientOptions{
		ElicitationHandler: (&user{reply: answering("unused")}).handle, MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "ask-user", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	callID, _ = res.Meta["io.toolgate/call_id"].(string)
	if !res.NeedsInput() || res.RequestState == "" || callID == "" || res.Meta["io.toolgate/outcome"] != "awaiting_user" {
		b, _ := json.Marshal(res)
		t.Fatalf("not an input_required result: %s", b)
	}
	return callID, res.RequestState
}

// retryAt sends the retry of an ask-user call, with the answer and the
// requestState, to h (a fresh 2026-07-28 client: nothing ties it to the
// replica that asked).
func retryAt(t *testing.T, h *harness, token string, args map[string]any, state, answer string) (*mcp.CallToolResult, error) {
	t.Helper()
	cs := h.mcpSessionWith(token, "2026-07-28", &mcp.ClientOptions{
		ElicitationHandler: (&user{reply: answering("unused")}).handle, MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	return cs.CallTool(context.Background(), &mcp.CallToolParams{
		Name: "ask-user", Arguments: args, RequestState: state,
		InputResponses: mcp.InputResponseMap{"answer": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": answer}}},
	})
}

// Replicas sharing mcp.request_state_key_file accept each other's
// requestStates: the input_required result comes from replica A, the
// retry with the answer goes to replica B, which answers the question
// and returns the call's result, as A would have.
func TestMCPAskUserRetryAtAnotherReplicaSharingTheKey(t *testing.T) {
	t.Parallel()
	key := filepath.Join(t.TempDir(), "mcp-request-state.key")
	a, b := askReplicas(t, key, key)
	alice := a.audToken(mcpAudience, "acme", "alice", "developer")
	args := map[string]any{"question": "Ship it?", "options": []string{"yes", "no"}}
	callID, state := askAt(t, a, alice, args)

	res, err := retryAt(t, b, alice, args, state, "yes")
	if err != nil || res.NeedsInput() || res.IsError || res.Meta["io.toolgate/outcome"] != "ok" || res.Meta["io.toolgate/call_id"] != callID ||
		len(textOf(res)) != 1 || textOf(res)[0] != "yes" {
		b, _ := json.Marshal(res)
		t.Fatalf("the retry at replica B: %v %s", err, b)
	}
	if data, _ := res.StructuredContent.(map[string]any); data["answered_by"] != "alice" {
		t.Fatalf("structured content %v", res.StructuredContent)
	}
	for name, h := range map[string]*harness{"A": a, "B": b} {
		if p := h.do("GET", "/v1/calls/"+callID, alice, nil); p.status != 200 || p.str("outcome") != "ok" || p.str("content") != "yes" {
			t.Fatalf("the call at replica %s: %d %s", name, p.status, p.raw)
		}
	}
	if got := a.steps("acme", callID); got != "question/answered result/awaiting_user decision/allow" {
		t.Fatalf("audit events of the call: %s", got)
	}
	// Once, whichever replica the second answer reaches.
	if _, err := retryAt(t, a, alice, args, state, "no"); rpcCode(err) != -32009 {
		t.Fatalf("a second answer at replica A: %v", err)
	}
	a.verify("acme")
}

// Replicas with different key files refuse each other's requestStates
// exactly as they refuse a forged one, and nothing is answered; the
// replica that asked still accepts the retry.
func TestMCPAskUserRetryAtAnotherReplicaWithAnotherKeyIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, b := askReplicas(t, filepath.Join(dir, "a.key"), filepath.Join(dir, "b.key"))
	alice := a.audToken(mcpAudience, "acme", "alice", "developer")
	args := map[string]any{"question": "Ship it?", "options": []string{"yes", "no"}}
	callID, state := askAt(t, a, alice, args)

	_, err := retryAt(t, b, alice, args, state, "yes")
	_, forged := retryAt(t, b, alice, args, "tg1.eyJxIjoieCJ9.AAAA", "yes")
	if err == nil || rpcCode(err) != -32602 || rpcCode(forged) != -32602 || err.Error() != forged.Error() {
		t.Fatalf("the retry at replica B: %v; a forged state there: %v", err, forged)
	}
	for name, h := range map[string]*harness{"A": a, "B": b} {
		if p := h.do("GET", "/v1/calls/"+callID, alice, nil); p.status != 200 || p.str("outcome") != "pending" {
			t.Fatalf("the question changed (replica %s): %d %s", name, p.status, p.raw)
		}
	}
	if got := a.steps("acme", callID); got != "result/awaiting_user decision/allow" {
		t.Fatalf("audit events of the call: %s", got)
	}

	res, err := retryAt(t, a, alice, args, state, "no")
	if err != nil || res.Meta["io.toolgate/outcome"] != "ok" || len(textOf(res)) != 1 || textOf(res)[0] != "no" {
		t.Fatalf("the retry at replica A: %v %+v", err, res)
	}
	a.verify("acme")
}

// The gateway creates the requestState key beside the checkpoint key on
// first start (mode 0600), keeps it across restarts, and refuses to start
// on a key file that became unfit after the config was loaded, naming
// the key.
func TestMCPRequestStateKeyFileAtStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	must(t, os.CopyFS(filepath.Join(dir, "policies"), os.DirFS("../../policies")))
	must(t, os.Mkdir(filepath.Join(dir, "ws"), 0o755))
	yaml := `listen: "127.0.0.1:0"
policy: {dir: policies}
audit: {driver: sqlite, dsn: db/audit.db}
auth:
  jwt: {hs256_secret_file: secret}
tenants:
  acme: {workspace: ws}
tools:
  builtin: [read-file, ask-user]
`
	file := filepath.Join(dir, "gateway.yaml")
	must(t, os.WriteFile(file, []byte(yaml), 0o644))
	key := filepath.Join(dir, "db", config.DefaultRequestStateKeyName)
	startOnce := func() error {
		cfg, err := config.Load(file)
		if err != nil {
			return err
		}
		g, err := New(context.Background(), cfg, nil)
		if err == nil {
			g.Close()
		}
		return err
	}
	must(t, startOnce())
	fi, err := os.Stat(key)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the key file after the first start: %v %v", fi, err)
	}
	first, _ := os.ReadFile(key)
	must(t, startOnce())
	if again, _ := os.ReadFile(key); string(again) != string(first) {
		t.Fatal("a restart replaced the key")
	}

	// Unfit after Load: New refuses it.
	cfg, err := config.Load(file)
	must(t, err)
	must(t, os.Chmod(key, 0o644))
	g, err := New(context.Background(), cfg, nil)
	if err == nil {
		g.Close()
		t.Fatal("the gateway started with a world-readable requestState key")
	}
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Key != "mcp.request_state_key_file" || !strings.Contains(ce.Problem, "group and others must have no access") {
		t.Fatalf("error = %v", err)
	}
	// Load refuses it too.
	if _, err := config.Load(file); err == nil || !strings.Contains(err.Error(), "mcp.request_state_key_file") {
		t.Fatalf("Load: %v", err)
	}
}
