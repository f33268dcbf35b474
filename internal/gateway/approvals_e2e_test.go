package gateway

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// held makes alice's write to release/VERSION wait for a human and returns
// the call's response.
func (h *harness) held(token, content string) response {
	h.t.Helper()
	r := h.call(token, "write-file", `{"arguments":{"path":"release/VERSION","content":"`+content+`"},"session_id":"s-1"}`)
	if r.status != 200 || r.str("outcome") != "approval_required" || r.str("content") != "approval required" {
		h.t.Fatalf("held call: %d %s", r.status, r.raw)
	}
	return r
}

func approvalID(t *testing.T, r response) string {
	t.Helper()
	data, _ := r.body["data"].(map[string]any)
	id, _ := data["approval_id"].(string)
	if id == "" || data["expires_at"] == nil {
		t.Fatalf("held call has no approval id: %s", r.raw)
	}
	return id
}

func (h *harness) release() string {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.dir, "ws/acme/release/VERSION"))
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

func TestApprovalHappyPathRunsTheHeldCallOnce(t *testing.T) {
	t.Parallel()
	h := start(t)
	alice := h.token("acme", "alice", "developer")
	bob := h.token("acme", "bob", "approver")

	r := h.held(alice, "2")
	id, callID := approvalID(t, r), r.str("call_id")
	if h.release() != "1\n" {
		t.Fatal("a held call ran")
	}
	if p := h.do("GET", "/v1/calls/"+callID, alice, nil); p.status != 200 || p.str("outcome") != "pending" || p.str("approval_id") != id {
		t.Fatalf("poll while pending: %d %s", p.status, p.raw)
	}

	// The approver sees the request, its reasons, who asked and the expiry.
	l := h.do("GET", "/v1/approvals?status=pending", bob, nil)
	list, _ := l.body["approvals"].([]any)
	if l.status != 200 || len(list) != 1 {
		t.Fatalf("pending approvals: %d %s", l.status, l.raw)
	}
	a := h.do("GET", "/v1/approvals/"+id, bob, nil)
	in, _ := a.body["input"].(map[string]any)
	args, _ := in["args"].(map[string]any)
	if a.status != 200 || a.str("principal") != "alice" || a.str("status") != "pending" || a.str("tool") != "write-file" ||
		args["path"] != "release/VERSION" || a.str("expires_at") == "" ||
		!strings.Contains(strings.Join(strs(a.body["reasons"]), ";"), "release/** need a human") {
		t.Fatalf("approval view: %d %s", a.status, a.raw)
	}
	digest := a.str("request_digest")

	ok := h.do("POST", "/v1/approvals/"+id+"/approve", bob, []byte(`{"comment":"release 2"}`))
	if ok.status != 200 || ok.str("status") != "approved" || ok.str("outcome") != "ok" || ok.str("decided_by") != "bob" || ok.str("comment") != "release 2" {
		t.Fatalf("approve: %d %s", ok.status, ok.raw)
	}
	if got := h.release(); got != "2" {
		t.Fatalf("release/VERSION = %q after approval, want the held content", got)
	}
	// The OPA export says who approved: the decision made at approval
	// carries the approval in custom.
	approvedBy := ""
	for _, l := range h.exportAs("acme", "format=opa") {
		var m map[string]any
		must(t, json.Unmarshal(l, &m))
		c := m["custom"].(map[string]any)
		if a, _ := c["approval"].(map[string]any); c["call_id"] == callID && a != nil && a["id"] == id && a["by"] != nil {
			approvedBy = a["by"].(string) + ": " + a["comment"].(string)
		}
	}
	if approvedBy != "bob: release 2" {
		t.Fatalf("the OPA export does not say who approved (%q)", approvedBy)
	}
	p := h.do("GET", "/v1/calls/"+callID, alice, nil)
	if p.status != 200 || p.str("outcome") != "ok" || p.str("content") != "wrote 1 bytes to release/VERSION" || p.body["is_error"] != false {
		t.Fatalf("poll after approval: %d %s", p.status, p.raw)
	}

	// Every step is chained: held, second decision with the approver,
	// approval, result; all of the same digest.
	evs := h.events("acme", "call_id="+callID)
	var steps []string
	for i := len(evs) - 1; i >= 0; i-- {
		e := evs[i]
		steps = append(steps, e["phase"].(string)+":"+e["outcome"].(string))
		if e["request_digest"] != digest {
			t.Errorf("event %s/%s has digest %v, want %s", e["phase"], e["outcome"], e["request_digest"], digest)
		}
		if ap, _ := e["approval"].(map[string]any); ap["id"] != id {
			t.Errorf("event %s/%s is not linked to the approval: %v", e["phase"], e["outcome"], e["approval"])
		}
	}
	if strings.Join(steps, " ") != "decision:approval_required decision:allow approval:approved result:ok" {
		t.Fatalf("audit steps: %v", steps)
	}
	second := evs[2]
	if in := second["input"].(map[string]any); in["approval"].(map[string]any)["id"] != "bob" {
		t.Fatalf("second decision input has no approver: %v", second["input"])
	}
	h.verify("acme")
}

func TestApprovingTwiceRunsOnce(t *testing.T) {
	t.Parallel()
	h := start(t)
	alice := h.token("acme", "alice", "developer")
	bob := h.token("acme", "bob", "approver")
	carol := h.token("acme", "carol", "approver")
	id := approvalID(t, h.held(alice, "2"))

	if r := h.do("POST", "/v1/approvals/"+id+"/approve", bob, nil); r.status != 200 || r.str("outcome") != "ok" {
		t.Fatalf("first approval: %d %s", r.status, r.raw)
	}
	// Someone changes the file; a second approval must not write again.
	must(t, os.WriteFile(filepath.Join(h.dir, "ws/acme/release/VERSION"), []byte("3"), 0o644))
	for _, tok := range []string{bob, carol} {
		if r := h.do("POST", "/v1/approvals/"+id+"/approve", tok, nil); r.status != 409 || r.errCode() != "conflict" {
			t.Fatalf("second approval: %d %s", r.status, r.raw)
		}
		if r := h.do("POST", "/v1/approvals/"+id+"/deny", tok, nil); r.status != 409 {
			t.Fatalf("deny after approval: %d %s", r.status, r.raw)
		}
	}
	if got := h.release(); got != "3" {
		t.Fatalf("the held call ran again: release/VERSION = %q", got)
	}
	if n := len(h.events("acme", "phase=result")); n != 1 {
		t.Fatalf("%d result events, want 1", n)
	}
}

func TestExpiredApprovalIsRefusedAndAuditedOnce(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	h := start(t, func(s *setup) {
		s.extraYAML = "approvals:\n  ttl: 10m\n"
		s.clock = clock
	})
	alice := h.token("acme", "alice", "developer")
	bob := h.token("acme", "bob", "approver")
	r := h.held(alice, "2")
	id, callID := approvalID(t, r), r.str("call_id")
	if a := h.do("GET", "/v1/approvals/"+id, bob, nil); a.str("status") != "pending" {
		t.Fatalf("approval before its expiry: %s", a.raw)
	}

	clock.Advance(11 * time.Minute) // past the expiry; the tokens (an hour) stay valid
	if r := h.do("POST", "/v1/approvals/"+id+"/approve", bob, nil); r.status != 409 || !strings.Contains(r.raw2(), "expired") {
		t.Fatalf("approve after expiry: %d %s", r.status, r.raw)
	}
	if r := h.do("POST", "/v1/approvals/"+id+"/deny", bob, nil); r.status != 409 {
		t.Fatalf("deny after expiry: %d %s", r.status, r.raw)
	}
	if p := h.do("GET", "/v1/calls/"+callID, alice, nil); p.str("outcome") != "expired" {
		t.Fatalf("poll after expiry: %s", p.raw)
	}
	if a := h.do("GET", "/v1/approvals/"+id, bob, nil); a.str("status") != "expired" {
		t.Fatalf("approval after expiry: %s", a.raw)
	}
	if l := h.do("GET", "/v1/approvals?status=pending", bob, nil); len(l.body["approvals"].([]any)) != 0 {
		t.Fatalf("expired approval still pending: %s", l.raw)
	}
	if n := len(h.events("acme", "outcome=expired")); n != 1 {
		t.Fatalf("%d expiry events, want 1", n)
	}
	if h.release() != "1\n" {
		t.Fatal("an expired call ran")
	}
	h.verify("acme")
}

func TestAnotherTenantsApprovalDoesNotExist(t *testing.T) {
	t.Parallel()
	h := start(t)
	alice := h.token("acme", "alice", "developer")
	r := h.held(alice, "2")
	id, callID := approvalID(t, r), r.str("call_id")
	globex := h.token("globex", "gina", "approver", "developer")
	for _, tc := range []struct{ method, path string }{
		{"GET", "/v1/approvals/" + id},
		{"POST", "/v1/approvals/" + id + "/approve"},
		{"POST", "/v1/approvals/" + id + "/deny"},
		{"GET", "/v1/calls/" + callID},
	} {
		if r := h.do(tc.method, tc.path, globex, nil); r.status != 404 || r.errCode() != "not_found" {
			t.Errorf("%s %s from globex: %d %s", tc.method, tc.path, r.status, r.raw)
		}
	}
	if l := h.do("GET", "/v1/approvals", globex, nil); len(l.body["approvals"].([]any)) != 0 {
		t.Fatalf("globex lists acme's approvals: %s", l.raw)
	}
	// Within acme, only approvers decide and only the caller polls.
	if r := h.do("GET", "/v1/approvals", alice, nil); r.status != 403 {
		t.Fatalf("a developer lists approvals: %d", r.status)
	}
	if r := h.do("GET", "/v1/calls/"+callID, h.token("acme", "mallory", "developer"), nil); r.status != 404 {
		t.Fatalf("another principal polls alice's call: %d", r.status)
	}
	if h.release() != "1\n" {
		t.Fatal("the held call ran")
	}
}

func TestSelfApprovalIsForbiddenByThePolicy(t *testing.T) {
	t.Parallel()
	h := start(t)
	alice := h.token("acme", "alice", "developer", "approver")
	id := approvalID(t, h.held(alice, "2"))

	r := h.do("POST", "/v1/approvals/"+id+"/approve", alice, nil)
	if r.status != 403 || r.errCode() != "forbidden" || !strings.Contains(r.raw2(), "you cannot approve your own call") {
		t.Fatalf("self-approval: %d %s", r.status, r.raw)
	}
	if h.release() != "1\n" {
		t.Fatal("a self-approved call ran")
	}
	// The refusal is audited, and the call still waits for someone else.
	denied := h.events("acme", "outcome=denied&principal=alice")
	if len(denied) != 1 || denied[0]["approval"].(map[string]any)["by"] != "alice" {
		t.Fatalf("self-approval decision events: %v", denied)
	}
	bob := h.token("acme", "bob", "approver")
	if r := h.do("POST", "/v1/approvals/"+id+"/approve", bob, nil); r.status != 200 || r.str("outcome") != "ok" {
		t.Fatalf("approval by another approver: %d %s", r.status, r.raw)
	}
	if h.release() != "2" {
		t.Fatal("the approved call did not run")
	}
}

func TestDeniedApprovalNeverRuns(t *testing.T) {
	t.Parallel()
	h := start(t)
	alice := h.token("acme", "alice", "developer")
	bob := h.token("acme", "bob", "approver")
	r := h.held(alice, "2")
	id, callID := approvalID(t, r), r.str("call_id")
	if r := h.do("POST", "/v1/approvals/"+id+"/deny", bob, []byte(`{"comment":"not now"}`)); r.status != 200 || r.str("status") != "denied" {
		t.Fatalf("deny: %d %s", r.status, r.raw)
	}
	if r := h.do("POST", "/v1/approvals/"+id+"/approve", bob, nil); r.status != 409 {
		t.Fatalf("approve after deny: %d %s", r.status, r.raw)
	}
	if p := h.do("GET", "/v1/calls/"+callID, alice, nil); p.str("outcome") != "denied" {
		t.Fatalf("poll after deny: %s", p.raw)
	}
	if r := h.do("POST", "/v1/approvals/"+id+"/deny", bob, []byte(`{"comment":"x","tenant":"globex"}`)); r.status != 400 {
		t.Fatalf("unknown body member: %d %s", r.status, r.raw)
	}
	if h.release() != "1\n" {
		t.Fatal("a denied call ran")
	}
}

// What runs after approval is exactly what was held: the stored call is
// re-prepared and must have the held digest. A symlink moved in between
// changes the resolved target, so nothing runs.
func TestApprovalRunsOnlyTheUnchangedArtifact(t *testing.T) {
	t.Parallel()
	h := start(t)
	alice := h.token("acme", "alice", "developer")
	bob := h.token("acme", "bob", "approver")
	link := filepath.Join(h.dir, "ws/acme/release/current")
	must(t, os.Symlink("VERSION", link))
	must(t, os.WriteFile(filepath.Join(h.dir, "ws/acme/release/OTHER"), []byte("other\n"), 0o644))

	r := h.call(alice, "write-file", `{"arguments":{"path":"release/current","content":"9"}}`)
	id, callID := approvalID(t, r), r.str("call_id")
	held := h.do("GET", "/v1/approvals/"+id, bob, nil)
	if res := held.body["input"].(map[string]any)["resources"].([]any)[0].(map[string]any); res["path"] != "release/VERSION" {
		t.Fatalf("held resource: %v", res)
	}
	must(t, os.Remove(link))
	must(t, os.Symlink("OTHER", link))
	before := h.snapshot()

	a := h.do("POST", "/v1/approvals/"+id+"/approve", bob, nil)
	if a.status != 200 || a.str("status") != "approved" || a.str("outcome") != "tool_error" {
		t.Fatalf("approve a changed call: %d %s", a.status, a.raw)
	}
	h.assertUnchanged(before)
	if p := h.do("GET", "/v1/calls/"+callID, alice, nil); p.str("outcome") != "tool_error" || p.str("content") != "the tool failed" {
		t.Fatalf("poll: %s", p.raw)
	}
	res := h.events("acme", "phase=result&call_id="+callID)
	if len(res) != 1 || !strings.Contains(res[0]["result"].(map[string]any)["error"].(string), "changed") ||
		res[0]["request_digest"] != held.str("request_digest") {
		t.Fatalf("result event: %v", res)
	}
}

func strs(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, e := range l {
		s, _ := e.(string)
		out = append(out, s)
	}
	return out
}

func (r response) raw2() string { return string(r.raw) }
