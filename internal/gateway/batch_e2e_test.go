package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// results returns a batch response's results as objects.
func (r response) results(t *testing.T) []map[string]any {
	t.Helper()
	list, ok := r.body["results"].([]any)
	if !ok {
		t.Fatalf("no results in %s", r.raw)
	}
	out := make([]map[string]any, len(list))
	for i, v := range list {
		out[i] = v.(map[string]any)
	}
	return out
}

func TestBatchRunsEachCallLikeASingleCallInRequestOrder(t *testing.T) {
	t.Parallel()
	h := start(t)
	dev := h.token("acme", "alice", "developer")
	r := h.do("POST", "/v1/batches", dev, []byte(`{"session_id":"s-1","calls":[
		{"tool":"read-file","arguments":{"path":"docs/guide.md"},"call_id":"b-read"},
		{"tool":"write-file","arguments":{"path":"notes/out.txt","content":"first"},"call_id":"b-w1"},
		{"tool":"read-file","arguments":{"path":"secrets/db.env"},"call_id":"b-secret"},
		{"tool":"no-such-tool","arguments":{},"call_id":"b-unknown"},
		{"tool":"write-file","arguments":{"path":"notes/out.txt","content":"second"},"call_id":"b-w2"},
		{"tool":"read-file","arguments":{"path":7},"call_id":"b-invalid"}
	]}`))
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.raw)
	}
	want := []struct{ id, outcome, content string }{
		{"b-read", "ok", "     1\tacme guide\n     2\tline two\n"},
		{"b-w1", "ok", "wrote 5 bytes to notes/out.txt"},
		{"b-secret", "denied", "access to secrets/db.env is not allowed: the path is protected"},
		{"b-unknown", "unavailable", "tool unavailable"},
		{"b-w2", "ok", "wrote 6 bytes to notes/out.txt"},
		{"b-invalid", "invalid_arguments", "invalid arguments: /path: must be string"},
	}
	res := r.results(t)
	if len(res) != len(want) {
		t.Fatalf("%d results for %d calls", len(res), len(want))
	}
	for i, w := range want {
		if res[i]["call_id"] != w.id || res[i]["outcome"] != w.outcome || !strings.HasPrefix(res[i]["content"].(string), w.content) {
			t.Errorf("result %d = %v %v %q, want %s %s %q", i, res[i]["call_id"], res[i]["outcome"], res[i]["content"], w.id, w.outcome, w.content)
		}
	}
	// Two writes to one file ran in request order.
	b, err := os.ReadFile(filepath.Join(h.dir, "ws", "acme", "notes", "out.txt"))
	if err != nil || string(b) != "second" {
		t.Fatalf("notes/out.txt = %q (%v), want the second write's content", b, err)
	}
	// Each call is audited on its own, exactly as a single call is.
	for _, w := range want {
		evs := h.events("acme", "call_id="+w.id)
		n := 1
		if w.outcome == "ok" {
			n = 2
		}
		if len(evs) != n {
			t.Errorf("call %s has %d events, want %d", w.id, len(evs), n)
		}
	}
	h.verify("acme")
}

func TestBatchDecisionsDecideWithoutEffects(t *testing.T) {
	t.Parallel()
	h := start(t)
	before := h.snapshot()
	r := h.do("POST", "/v1/batches/decisions", h.token("acme", "alice", "developer"), []byte(`{"calls":[
		{"tool":"write-file","arguments":{"path":"notes/x.txt","content":"x"}},
		{"tool":"write-file","arguments":{"path":"secrets/x","content":"x"}},
		{"tool":"write-file","arguments":{"path":"release/x","content":"x"}}
	]}`))
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.raw)
	}
	res := r.results(t)
	for i, want := range []string{"allow", "denied", "approval_required"} {
		if res[i]["outcome"] != want || !strings.HasPrefix(fmt.Sprint(res[i]["request_digest"]), "sha256:") {
			t.Errorf("decision %d: %v, want %s with a digest", i, res[i], want)
		}
	}
	h.assertUnchanged(before)
}

func TestBatchEnvelopeErrorsArePrecise400s(t *testing.T) {
	t.Parallel()
	h := start(t, func(s *setup) { s.limitYAML = "  max_batch_calls: 3\n" })
	dev := h.token("acme", "alice", "developer")
	call := `{"tool":"read-file","arguments":{"path":"docs/guide.md"}}`
	tests := []struct{ name, body, message string }{
		{"no calls member", `{"session_id":"s"}`, "calls is required"},
		{"empty calls", `{"calls":[]}`, "calls must not be empty"},
		{"calls not an array", `{"calls":{}}`, "calls must be an array of call objects"},
		{"too many calls", `{"calls":[` + strings.Repeat(call+",", 3) + call + `]}`, "calls has more than 3 entries; a batch holds at most 3 calls"},
		{"entry not an object", `{"calls":[` + call + `,"read-file"]}`, "calls[1] must be a call object"},
		{"entry without tool", `{"calls":[{"arguments":{}}]}`, "calls[0].tool is required"},
		{"tool not a string", `{"calls":[{"tool":7}]}`, "calls[0].tool must be a string"},
		{"empty tool", `{"calls":[{"tool":""}]}`, "calls[0].tool must be a tool name of 1-128 bytes"},
		{"identity in an entry", `{"calls":[{"tool":"read-file","tenant":"globex"}]}`, `calls[0] has unknown member "tenant"`},
		{"duplicate member in an entry", `{"calls":[{"tool":"read-file","tool":"grep"}]}`, `calls[0] has duplicate member "tool"`},
		{"repeated call id", `{"calls":[{"tool":"grep","call_id":"a"},{"tool":"grep","call_id":"b"},{"tool":"grep","call_id":"a"}]}`, "calls[2].call_id repeats the call_id of calls[0]"},
		{"bad call id", `{"calls":[{"tool":"grep","call_id":"a b"}]}`, "calls[0].call_id must be 1-128 characters"},
		{"identity at the top", `{"principal":"bob","calls":[` + call + `]}`, `unknown member "principal"`},
		{"not an object", `[` + call + `]`, "body must be a JSON object"},
		{"trailing data", `{"calls":[` + call + `]} {}`, "unexpected data after the JSON object"},
	}
	before := h.snapshot()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.do("POST", "/v1/batches", dev, []byte(tt.body))
			msg, _ := r.body["error"].(map[string]any)["message"].(string)
			if r.status != 400 || r.errCode() != "invalid_request" || !strings.HasPrefix(msg, tt.message) {
				t.Fatalf("%d %s, want 400 %q", r.status, r.raw, tt.message)
			}
		})
	}
	h.assertUnchanged(before)
	if evs := h.events("acme", "limit=10"); len(evs) != 0 {
		t.Fatalf("rejected envelopes were decided: %d events", len(evs))
	}
}

// boomPolicy makes authorization fail at evaluation for one path only: a
// second definition of the complete rule decision conflicts with the pack's.
const boomPolicy = `package toolgate.authz

decision := {"allow": false} if input.args.path == "docs/boom.md"
`

func TestBatchPolicyFailureAnswersWithTheInitiatingStatus(t *testing.T) {
	t.Parallel()
	h := start(t, func(s *setup) {
		s.policy = func(dir string) { must(t, os.WriteFile(filepath.Join(dir, "boom.rego"), []byte(boomPolicy), 0o644)) }
		s.files = map[string]string{"acme/docs/boom.md": "boom\n"}
	})
	dev := h.token("acme", "alice", "developer")
	before := h.snapshot()
	r := h.do("POST", "/v1/batches", dev, []byte(`{"calls":[
		{"tool":"write-file","arguments":{"path":"notes/a.txt","content":"a"},"call_id":"c-a"},
		{"tool":"read-file","arguments":{"path":"docs/boom.md"},"call_id":"c-boom"},
		{"tool":"write-file","arguments":{"path":"notes/c.txt","content":"c"},"call_id":"c-c"}
	]}`))
	if r.status != 503 || r.errCode() != "unavailable" {
		t.Fatalf("status %d: %s, want the 503 a single call would get", r.status, r.raw)
	}
	res := r.results(t)
	failure, _ := res[1]["error"].(map[string]any)
	if res[1]["call_id"] != "c-boom" || failure["code"] != "unavailable" {
		t.Fatalf("initiating call's entry %v, want its unavailable error", res[1])
	}
	for _, i := range []int{0, 2} {
		data, _ := res[i]["data"].(map[string]any)
		if res[i]["outcome"] != "canceled" || res[i]["content"] != "canceled" || data["started"] != false {
			t.Errorf("sibling %d: %v, want canceled, not started", i, res[i])
		}
		evs := h.events("acme", "call_id="+res[i]["call_id"].(string))
		if len(evs) == 0 || evs[0]["outcome"] != "canceled" {
			t.Errorf("sibling %d: last event %v, want a canceled event", i, evs)
		}
	}
	h.assertUnchanged(before)
	h.verify("acme")
}

// A batch call that needs a human is held as a single call is: the caller
// gets its approval id and polls it, the approver's approval runs it once,
// and its siblings run without waiting for the human.
func TestBatchHoldsACallForApprovalLikeASingleCall(t *testing.T) {
	t.Parallel()
	h := start(t)
	alice := h.token("acme", "alice", "developer")
	bob := h.token("acme", "bob", "approver")
	r := h.do("POST", "/v1/batches", alice, []byte(`{"session_id":"s-1","calls":[
		{"tool":"write-file","arguments":{"path":"release/VERSION","content":"2"},"call_id":"b-held"},
		{"tool":"read-file","arguments":{"path":"docs/guide.md"},"call_id":"b-read"}
	]}`))
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.raw)
	}
	res := r.results(t)
	data, _ := res[0]["data"].(map[string]any)
	id, _ := data["approval_id"].(string)
	if res[0]["outcome"] != "approval_required" || res[0]["content"] != "approval required" || id == "" || data["expires_at"] == nil {
		t.Fatalf("held call %v, want approval_required with an approval id", res[0])
	}
	if res[1]["outcome"] != "ok" {
		t.Fatalf("sibling %v, want ok", res[1])
	}
	if h.release() != "1\n" {
		t.Fatal("a held call ran")
	}
	if p := h.do("GET", "/v1/calls/b-held", alice, nil); p.status != 200 || p.str("outcome") != "pending" || p.str("approval_id") != id {
		t.Fatalf("poll while pending: %d %s", p.status, p.raw)
	}
	ok := h.do("POST", "/v1/approvals/"+id+"/approve", bob, []byte(`{}`))
	if ok.status != 200 || ok.str("outcome") != "ok" {
		t.Fatalf("approve: %d %s", ok.status, ok.raw)
	}
	if got := h.release(); got != "2" {
		t.Fatalf("release/VERSION = %q after approval, want the held content", got)
	}
	if p := h.do("GET", "/v1/calls/b-held", alice, nil); p.status != 200 || p.str("outcome") != "ok" {
		t.Fatalf("poll after approval: %d %s", p.status, p.raw)
	}
	evs := h.events("acme", "call_id=b-held")
	var steps []string
	for i := len(evs) - 1; i >= 0; i-- {
		steps = append(steps, evs[i]["phase"].(string)+":"+evs[i]["outcome"].(string))
	}
	if strings.Join(steps, " ") != "decision:approval_required decision:allow approval:approved result:ok" {
		t.Fatalf("audit steps: %v", steps)
	}
	h.verify("acme")
}

// Every batch call's decision is also decided by the shadow policy, as a
// single call's is, without changing its outcome.
func TestBatchCallsAreShadowDecidedLikeSingleCalls(t *testing.T) {
	t.Parallel()
	shadowDir := filepath.Join(t.TempDir(), "shadow")
	writeShadowPolicy(t, shadowDir)
	h := start(t, func(s *setup) { s.policyYAML = "  shadow: " + shadowDir + "\n" })
	r := h.do("POST", "/v1/batches", h.token("acme", "alice", "developer"), []byte(`{"calls":[
		{"tool":"read-file","arguments":{"path":"docs/guide.md"},"call_id":"s-read"},
		{"tool":"write-file","arguments":{"path":"notes/s.txt","content":"x"},"call_id":"s-write"}
	]}`))
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.raw)
	}
	for i, want := range []struct{ id, shadow string }{{"s-read", "denied"}, {"s-write", "allow"}} {
		if res := r.results(t)[i]; res["outcome"] != "ok" {
			t.Fatalf("call %s: %v, want the enforced ok", want.id, res)
		}
		evs := h.events("acme", "phase=decision&call_id="+want.id)
		sh, _ := evs[0]["shadow"].(map[string]any)
		if sh["revision"] != "shadow-1" || sh["outcome"] != want.shadow {
			t.Errorf("call %s: shadow %v, want %s", want.id, sh, want.shadow)
		}
	}
	h.verify("acme")
}
