package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/idempotency"
	"github.com/toolgate/toolgate/internal/pipeline"
	"github.com/toolgate/toolgate/sdk/client"
)

// sameResponse fails unless b is exactly a's response: same call and
// decision ids, outcome, content and data.
func sameResponse(t *testing.T, what string, a, b response) {
	t.Helper()
	if a.status != b.status || !reflect.DeepEqual(a.body, b.body) {
		t.Fatalf("%s: %d %s\nwant the recorded %d %s", what, b.status, b.raw, a.status, a.raw)
	}
}

func (h *harness) read(path string) string {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.dir, "ws", filepath.FromSlash(path)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		h.t.Fatal(err)
	}
	return string(b)
}

// idempotencyMetric is the value of toolgate_idempotency_total for result.
func (h *harness) idempotencyMetric(result string) string {
	h.t.Helper()
	r := h.do("GET", "/metrics", "", nil)
	for _, line := range strings.Split(string(r.raw), "\n") {
		if v, ok := strings.CutPrefix(line, `toolgate_idempotency_total{result="`+result+`"} `); ok {
			return v
		}
	}
	return "0"
}

// phases lists the tenant's events of a call id, oldest first, as
// "phase:outcome".
func (h *harness) phases(tenant, callID string) []string {
	h.t.Helper()
	evs := h.events(tenant, "call_id="+callID)
	var out []string
	for i := len(evs) - 1; i >= 0; i-- {
		out = append(out, evs[i]["phase"].(string)+":"+evs[i]["outcome"].(string))
	}
	return out
}

// An edit that would fail the second time (old_string then matches
// twice) shows whether a retry ran it again.
const editTodo = `{"arguments":{"path":"notes/todo.txt","old_string":"todo","new_string":"todo todo"},"call_id":"edit-1","session_id":"s-1"}`

func TestRetriedCallRunsOnceAndAnswersTheRecordedResponse(t *testing.T) {
	t.Parallel()
	h := start(t)
	alice := h.token("acme", "alice", "developer")

	first := h.call(alice, "edit-file", editTodo)
	if first.status != 200 || first.str("outcome") != "ok" || first.str("call_id") != "edit-1" {
		t.Fatalf("first call: %d %s", first.status, first.raw)
	}
	// The same request, as a platform resends it: member order and spacing
	// may differ, the arguments are the same.
	for _, body := range []string{
		editTodo,
		`{"session_id":"s-1","call_id":"edit-1","arguments":{ "new_string":"todo todo", "old_string":"todo", "path":"notes/todo.txt" }}`,
	} {
		sameResponse(t, "retry", first, h.call(alice, "edit-file", body))
	}
	// A new token of the same principal (other roles, later expiry) is the
	// same caller.
	sameResponse(t, "retry with a new token", first, h.call(h.token("acme", "alice", "developer", "auditor"), "edit-file", editTodo))
	if got := h.read("acme/notes/todo.txt"); got != "todo todo\n" {
		t.Fatalf("notes/todo.txt = %q: the edit ran more than once", got)
	}
	if got := h.phases("acme", "edit-1"); strings.Join(got, " ") != "decision:allow result:ok" {
		t.Fatalf("audit of edit-1: %v, want one decision and one result", got)
	}

	// Through the SDK, whose doc comment promises it.
	c, err := client.New(h.base, alice)
	must(t, err)
	res, err := c.Call(t.Context(), "edit-file", map[string]any{"path": "notes/todo.txt", "old_string": "todo", "new_string": "todo todo"},
		&client.CallOptions{CallID: "edit-1", SessionID: "s-1"})
	if err != nil || res.DecisionID != first.str("decision_id") || res.Outcome != "ok" || res.Content != first.str("content") {
		t.Fatalf("SDK retry: %+v, %v; want decision %s", res, err, first.str("decision_id"))
	}
	if got := h.idempotencyMetric("replayed"); got != "4" {
		t.Fatalf("replayed = %s, want 4", got)
	}
	h.verify("acme")
}

func TestReusedCallIDWithAnotherRequestIsAConflict(t *testing.T) {
	t.Parallel()
	h := start(t)
	alice := h.token("acme", "alice", "developer")
	first := h.call(alice, "edit-file", editTodo)
	if first.status != 200 || first.str("outcome") != "ok" {
		t.Fatalf("first call: %d %s", first.status, first.raw)
	}
	before := h.snapshot()
	for _, tc := range []struct {
		name, token, path, body string
	}{
		{"other arguments", alice, "/v1/tools/edit-file/calls",
			`{"arguments":{"path":"notes/todo.txt","old_string":"todo","new_string":"done"},"call_id":"edit-1","session_id":"s-1"}`},
		{"another tool", alice, "/v1/tools/write-file/calls",
			`{"arguments":{"path":"notes/todo.txt","content":"x"},"call_id":"edit-1","session_id":"s-1"}`},
		{"another session", alice, "/v1/tools/edit-file/calls", strings.Replace(editTodo, `"s-1"`, `"s-2"`, 1)},
		{"no session", alice, "/v1/tools/edit-file/calls", strings.Replace(editTodo, `,"session_id":"s-1"`, ``, 1)},
		{"another principal", h.token("acme", "bob", "developer"), "/v1/tools/edit-file/calls", editTodo},
		{"a decision", alice, "/v1/tools/edit-file/decisions", editTodo},
		{"garbage arguments", alice, "/v1/tools/edit-file/calls", `{"arguments":{"path":"notes/todo.txt","path":"x"},"call_id":"edit-1","session_id":"s-1"}`},
		{"a batch", alice, "/v1/batches",
			`{"session_id":"s-1","calls":[{"tool":"edit-file","arguments":{"path":"notes/todo.txt","old_string":"todo","new_string":"x"},"call_id":"edit-1"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do("POST", tc.path, tc.token, []byte(tc.body))
			if r.status != 409 || r.errCode() != "conflict" || !strings.Contains(string(r.raw), "call_id was already used by another request") {
				t.Fatalf("%d %s, want 409 conflict", r.status, r.raw)
			}
			// Nothing of the first call leaks to the other request.
			if strings.Contains(string(r.raw), first.str("decision_id")) || strings.Contains(string(r.raw), first.str("content")) {
				t.Fatalf("the conflict reveals the recorded response: %s", r.raw)
			}
		})
	}
	h.assertUnchanged(before)
	if got := h.phases("acme", "edit-1"); strings.Join(got, " ") != "decision:allow result:ok" {
		t.Fatalf("audit of edit-1: %v: a conflicting request was decided", got)
	}
	// The conflict through the SDK.
	c, err := client.New(h.base, alice)
	must(t, err)
	_, err = c.Call(t.Context(), "edit-file", map[string]any{"path": "notes/todo.txt", "old_string": "todo", "new_string": "done"},
		&client.CallOptions{CallID: "edit-1", SessionID: "s-1"})
	if !client.IsConflict(err) {
		t.Fatalf("SDK: %v, want a conflict", err)
	}
	if got, replayed := h.idempotencyMetric("conflict"), h.idempotencyMetric("replayed"); got != "9" || replayed != "0" {
		t.Fatalf("conflict = %s, replayed = %s; want 9 and 0", got, replayed)
	}

	// Another tenant's call ids are its own: globex's edit-1 runs.
	g := h.call(h.token("globex", "alice", "developer"), "edit-file", editTodo)
	if g.status != 200 || g.str("outcome") != "ok" || g.str("decision_id") == first.str("decision_id") {
		t.Fatalf("globex's edit-1: %d %s", g.status, g.raw)
	}
	if got := h.read("globex/notes/todo.txt"); got != "globex todo todo\n" {
		t.Fatalf("globex notes/todo.txt = %q", got)
	}
}

func TestRetryOfEveryOutcomeAnswersTheRecordedResponse(t *testing.T) {
	t.Parallel()
	h := start(t)
	alice := h.token("acme", "alice", "developer")
	for i, tc := range []struct{ tool, args, outcome string }{
		{"read-file", `{"path":"docs/guide.md"}`, "ok"},
		{"read-file", `{"path":"secrets/db.env"}`, "denied"},
		{"no-such-tool", `{}`, "unavailable"},
		{"read-file", `{"path":7}`, "invalid_arguments"},
		{"edit-file", `{"path":"docs/guide.md","old_string":"no such text","new_string":"x"}`, "tool_error"},
		{"read-file", `not json`, "invalid_arguments"},
	} {
		t.Run(tc.outcome, func(t *testing.T) {
			callID := fmt.Sprintf("o-%d", i)
			body := `{"arguments":` + tc.args + `,"call_id":"` + callID + `"}`
			if tc.args == "not json" {
				// The arguments member must be JSON for the envelope: a
				// string is decoded by prepare and refused there.
				body = `{"arguments":"not json","call_id":"` + callID + `"}`
			}
			first := h.call(alice, tc.tool, body)
			if first.status != 200 || first.str("outcome") != tc.outcome {
				t.Fatalf("first: %d %s, want %s", first.status, first.raw, tc.outcome)
			}
			sameResponse(t, "retry", first, h.call(alice, tc.tool, body))
			if got := h.events("acme", "phase=decision&call_id="+callID); len(got) != 1 {
				t.Fatalf("%d decision events, want 1", len(got))
			}
		})
	}

	// Decisions (PDP mode) too: the retry is the same decision.
	body := `{"arguments":{"path":"notes/pdp.txt","content":"x"},"call_id":"pdp-1"}`
	first := h.do("POST", "/v1/tools/write-file/decisions", alice, []byte(body))
	if first.status != 200 || first.str("outcome") != "allow" || first.str("request_digest") == "" {
		t.Fatalf("decision: %d %s", first.status, first.raw)
	}
	sameResponse(t, "retried decision", first, h.do("POST", "/v1/tools/write-file/decisions", alice, []byte(body)))
	if got := h.phases("acme", "pdp-1"); strings.Join(got, " ") != "decision:allow" {
		t.Fatalf("audit of pdp-1: %v", got)
	}
	// A call with a decision's call_id is another request.
	if r := h.call(alice, "write-file", body); r.status != 409 || r.errCode() != "conflict" {
		t.Fatalf("call with a decision's call_id: %d %s", r.status, r.raw)
	}
	if h.read("acme/notes/pdp.txt") != "" {
		t.Fatal("the decision's call ran")
	}
	// A batch of decisions too.
	batch := []byte(`{"calls":[{"tool":"write-file","arguments":{"path":"notes/b.txt","content":"x"},"call_id":"bd-1"},
		{"tool":"read-file","arguments":{"path":"secrets/db.env"},"call_id":"bd-2"}]}`)
	bd := h.do("POST", "/v1/batches/decisions", alice, batch)
	if bd.status != 200 {
		t.Fatalf("batch of decisions: %d %s", bd.status, bd.raw)
	}
	sameResponse(t, "retried batch of decisions", bd, h.do("POST", "/v1/batches/decisions", alice, batch))
	for _, id := range []string{"bd-1", "bd-2"} {
		if got := h.events("acme", "call_id="+id); len(got) != 1 {
			t.Fatalf("%s: %d events, want its one decision", id, len(got))
		}
	}
}

// gatedService is an upstream tool whose calls wait until the test opens
// the gate: a call that is still running, deterministically.
type gatedService struct {
	srv     *httptest.Server
	hits    atomic.Int64
	started chan struct{} // one value per call received
	gate    chan struct{} // closed: calls answer
}

// withGatedUpstream declares maintenance-window served by a gated service:
// as withUpstream, with a timeout no test waits for.
func withGatedUpstream(url string) func(*setup) {
	return func(s *setup) {
		withUpstream(url)(s)
		s.toolsYAML = strings.Replace(s.toolsYAML, "timeout: 2s", "timeout: 120s", 1)
	}
}

func newGatedService(t *testing.T) *gatedService {
	g := &gatedService{started: make(chan struct{}, 16), gate: make(chan struct{})}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		g.hits.Add(1)
		g.started <- struct{}{}
		w.Header().Set("Content-Type", "application/json")
		if bytes.Contains(body, []byte(`"legacy"`)) {
			w.WriteHeader(409)
			io.WriteString(w, `{"permanent":true}`)
			return
		}
		select {
		case <-g.gate:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, `"window: Sunday 02:00"`)
	}))
	t.Cleanup(g.srv.Close)
	return g
}

// logWatch is a log sink a test can wait on for lines.
type logWatch struct {
	mu   sync.Mutex
	buf  strings.Builder
	wake chan struct{} // closed and replaced on every write
}

func newLogWatch() *logWatch { return &logWatch{wake: make(chan struct{})} }

func (l *logWatch) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Write(p)
	close(l.wake)
	l.wake = make(chan struct{})
	return len(p), nil
}

// wait reports whether the log has n lines containing all of parts, within
// a minute (a bound for a hung test, not a timing assertion).
func (l *logWatch) wait(n int, parts ...string) bool {
	deadline := time.After(time.Minute)
	for {
		l.mu.Lock()
		found := 0
		for _, line := range strings.Split(l.buf.String(), "\n") {
			ok := true
			for _, p := range parts {
				ok = ok && strings.Contains(line, p)
			}
			if ok {
				found++
			}
		}
		wake := l.wake
		l.mu.Unlock()
		if found >= n {
			return true
		}
		select {
		case <-wake:
		case <-deadline:
			return false
		}
	}
}

func TestRetryWhileTheFirstRunsWaitsForItsResponse(t *testing.T) {
	t.Parallel()
	svc := newGatedService(t)
	logs := newLogWatch()
	h := start(t, withGatedUpstream(svc.srv.URL), func(s *setup) { s.logTo = logs })
	alice := h.token("acme", "alice", "developer")
	body := `{"arguments":{"service_id":"checkout"},"call_id":"slow-1"}`

	var wg sync.WaitGroup
	results := make([]response, 3)
	wg.Go(func() { results[0] = h.call(alice, "maintenance-window", body) })
	<-svc.started // the first call runs (its key is reserved before that)
	for i := 1; i < 3; i++ {
		wg.Go(func() { results[i] = h.call(alice, "maintenance-window", body) })
	}
	// Both retries wait (the pipeline says so at debug level), and only
	// then does the first call get its answer.
	if !logs.wait(2, "retry waits for the first request", "call_id=slow-1") {
		close(svc.gate)
		t.Fatal("the retries did not wait for the first call")
	}
	// Another request with the call_id does not wait: it is a conflict at
	// once, while the first still runs.
	if r := h.call(alice, "maintenance-window", `{"arguments":{"service_id":"search"},"call_id":"slow-1"}`); r.status != 409 || r.errCode() != "conflict" {
		close(svc.gate)
		t.Fatalf("other arguments while the first runs: %d %s", r.status, r.raw)
	}
	close(svc.gate)
	wg.Wait()
	if results[0].status != 200 || results[0].str("outcome") != "ok" || results[0].str("content") != "window: Sunday 02:00" {
		t.Fatalf("first call: %d %s", results[0].status, results[0].raw)
	}
	for _, r := range results[1:] {
		sameResponse(t, "retry while running", results[0], r)
	}
	if n := svc.hits.Load(); n != 1 {
		t.Fatalf("the service was called %d times, want 1", n)
	}

	// A retry that gives up waiting ends, and so does nothing: the key of
	// a call still running is held (here: reserved by a gateway that is
	// gone, its lease not over).
	now := time.Now()
	fp := idempotency.Fingerprint(idempotency.Request{Mode: "call", Tool: "maintenance-window",
		Arguments: []byte(`{"service_id":"payments"}`), Principal: "alice"})
	if cur, err := h.g.db.Idempotency().Reserve(t.Context(), &idempotency.Key{Tenant: "acme", CallID: "held-elsewhere",
		Fingerprint: fp, DecisionID: "d-elsewhere", State: idempotency.StatePending, CreatedAt: now,
		LeaseUntil: now.Add(time.Hour), ExpiresAt: now.Add(2 * time.Hour)}, now); err != nil || cur != nil {
		t.Fatalf("reserve: %+v %v", cur, err)
	}
	c, err := client.New(h.base, alice)
	must(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		if !logs.wait(1, "retry waits for the first request", "call_id=held-elsewhere") {
			t.Error("the retry of a running call did not wait")
		}
		cancel()
	}()
	if _, err := c.Call(ctx, "maintenance-window", map[string]any{"service_id": "payments"}, &client.CallOptions{CallID: "held-elsewhere"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("retry of a running call, canceled: %v", err)
	}
	if w, r := h.idempotencyMetric("waited"), h.idempotencyMetric("replayed"); w != "3" || r != "2" {
		t.Fatalf("waited = %s, replayed = %s; want 3 and 2", w, r)
	}
	if n := svc.hits.Load(); n != 1 {
		t.Fatalf("the service was called %d times, want 1", n)
	}
}

func TestRecordedPermanentFailureIsAnsweredAgain(t *testing.T) {
	t.Parallel()
	svc := newGatedService(t)
	h := start(t, withGatedUpstream(svc.srv.URL))
	alice := h.token("acme", "alice", "oncall")
	body := `{"arguments":{"service_id":"legacy"},"call_id":"perm-1"}`
	first := h.call(alice, "maintenance-window", body)
	if first.status != 424 || first.errCode() != "permanent_failure" {
		t.Fatalf("first: %d %s", first.status, first.raw)
	}
	sameResponse(t, "retry of a permanent failure", first, h.call(alice, "maintenance-window", body))
	// In a batch, the recorded permanent failure fails the batch again.
	batch := `{"calls":[{"tool":"maintenance-window","arguments":{"service_id":"legacy"},"call_id":"perm-2"}]}`
	b1 := h.do("POST", "/v1/batches", alice, []byte(batch))
	if b1.status != 424 || b1.errCode() != "permanent_failure" {
		t.Fatalf("batch: %d %s", b1.status, b1.raw)
	}
	sameResponse(t, "retried batch with a permanent failure", b1, h.do("POST", "/v1/batches", alice, []byte(batch)))
	if n := svc.hits.Load(); n != 2 {
		t.Fatalf("the service was called %d times, want 2 (once per call_id)", n)
	}
}

func TestBatchCallsAreIdempotentOneByOne(t *testing.T) {
	t.Parallel()
	h := start(t)
	alice := h.token("acme", "alice", "developer")
	batch := `{"session_id":"s-1","calls":[
		{"tool":"edit-file","arguments":{"path":"notes/todo.txt","old_string":"todo","new_string":"todo todo"},"call_id":"b-edit"},
		{"tool":"read-file","arguments":{"path":"docs/guide.md"},"call_id":"b-read"},
		{"tool":"write-file","arguments":{"path":"notes/new.txt","content":"new"}}
	]}`
	first := h.do("POST", "/v1/batches", alice, []byte(batch))
	if first.status != 200 {
		t.Fatalf("batch: %d %s", first.status, first.raw)
	}
	results := first.body["results"].([]any)
	again := h.do("POST", "/v1/batches", alice, []byte(batch))
	if again.status != 200 {
		t.Fatalf("retried batch: %d %s", again.status, again.raw)
	}
	retried := again.body["results"].([]any)
	for i := range 2 {
		if !reflect.DeepEqual(results[i], retried[i]) {
			t.Fatalf("calls[%d]: retried %v, want the recorded %v", i, retried[i], results[i])
		}
	}
	// The call without a call_id is a new call each time.
	if results[2].(map[string]any)["decision_id"] == retried[2].(map[string]any)["decision_id"] {
		t.Fatal("a call without a call_id was answered from a key")
	}
	if got := h.read("acme/notes/todo.txt"); got != "todo todo\n" {
		t.Fatalf("notes/todo.txt = %q: the batch's edit ran twice", got)
	}
	// A batch call retried alone is the same request.
	single := h.call(alice, "edit-file", `{"arguments":{"path":"notes/todo.txt","old_string":"todo","new_string":"todo todo"},"call_id":"b-edit","session_id":"s-1"}`)
	if single.status != 200 || !reflect.DeepEqual(map[string]any(single.body), results[0]) {
		t.Fatalf("batch call retried alone: %d %s, want %v", single.status, single.raw, results[0])
	}

	// A batch naming a used call_id with other arguments is refused whole,
	// before any of its calls is decided.
	before := h.snapshot()
	bad := h.do("POST", "/v1/batches", alice, []byte(`{"session_id":"s-1","calls":[
		{"tool":"write-file","arguments":{"path":"notes/fresh.txt","content":"x"},"call_id":"b-fresh"},
		{"tool":"read-file","arguments":{"path":"notes/todo.txt"},"call_id":"b-read"}
	]}`))
	if bad.status != 409 || bad.errCode() != "conflict" || !strings.Contains(string(bad.raw), "calls[1]: call_id was already used") {
		t.Fatalf("conflicting batch: %d %s", bad.status, bad.raw)
	}
	h.assertUnchanged(before)
	if evs := h.events("acme", "call_id=b-fresh"); len(evs) != 0 {
		t.Fatalf("a call of the refused batch was audited: %v", evs)
	}
	// ... and its other call_ids stay free.
	if r := h.call(alice, "write-file", `{"arguments":{"path":"notes/fresh.txt","content":"x"},"call_id":"b-fresh","session_id":"s-1"}`); r.status != 200 || r.str("outcome") != "ok" {
		t.Fatalf("b-fresh after the refused batch: %d %s", r.status, r.raw)
	}

	// Concurrent retries of one batch: each call runs once.
	var wg sync.WaitGroup
	par := `{"calls":[{"tool":"edit-file","arguments":{"path":"docs/guide.md","old_string":"line two","new_string":"line two, edited"},"call_id":"p-edit"}]}`
	out := make([]response, 6)
	for i := range out {
		wg.Go(func() { out[i] = h.do("POST", "/v1/batches", alice, []byte(par)) })
	}
	wg.Wait()
	for _, r := range out[1:] {
		sameResponse(t, "concurrent batch", out[0], r)
	}
	if r0 := out[0].body["results"].([]any)[0].(map[string]any); r0["outcome"] != "ok" {
		t.Fatalf("concurrent batch: %s", out[0].raw)
	}
	if got := h.phases("acme", "p-edit"); strings.Join(got, " ") != "decision:allow result:ok" {
		t.Fatalf("audit of p-edit: %v", got)
	}
}

func TestBatchCallsThatNeverStartedRunOnRetry(t *testing.T) {
	t.Parallel()
	h := start(t, func(s *setup) {
		s.policy = func(dir string) { must(t, os.WriteFile(filepath.Join(dir, "boom.rego"), []byte(boomPolicy), 0o644)) }
		s.files = map[string]string{"acme/docs/boom.md": "boom\n"}
	})
	alice := h.token("acme", "alice", "developer")
	batch := `{"calls":[
		{"tool":"write-file","arguments":{"path":"notes/a.txt","content":"a"},"call_id":"c-a"},
		{"tool":"read-file","arguments":{"path":"docs/boom.md"},"call_id":"c-boom"},
		{"tool":"write-file","arguments":{"path":"notes/c.txt","content":"c"},"call_id":"c-c"}
	]}`
	// The policy fails on c-boom: the batch fails closed, its siblings are
	// canceled before they start. None of the three is answered from a
	// key on retry: the retry is decided again and fails the same way.
	for range 2 {
		r := h.do("POST", "/v1/batches", alice, []byte(batch))
		if r.status != 503 {
			t.Fatalf("batch: %d %s", r.status, r.raw)
		}
		for _, i := range []int{0, 2} {
			if res := r.results(t)[i]; res["outcome"] != "canceled" || res["data"].(map[string]any)["started"] != false {
				t.Fatalf("calls[%d]: %v", i, res)
			}
		}
	}
	if r := h.call(alice, "read-file", `{"arguments":{"path":"docs/boom.md"},"call_id":"c-boom"}`); r.status != 503 {
		t.Fatalf("c-boom alone: %d %s, want it decided again (503)", r.status, r.raw)
	}
	// Without the failing call the canceled ones run: their keys were
	// released, not recorded as canceled.
	r := h.do("POST", "/v1/batches", alice, []byte(`{"calls":[
		{"tool":"write-file","arguments":{"path":"notes/a.txt","content":"a"},"call_id":"c-a"},
		{"tool":"write-file","arguments":{"path":"notes/c.txt","content":"c"},"call_id":"c-c"}
	]}`))
	if r.status != 200 || r.results(t)[0]["outcome"] != "ok" || r.results(t)[1]["outcome"] != "ok" {
		t.Fatalf("retry without the failing call: %d %s", r.status, r.raw)
	}
	if h.read("acme/notes/a.txt") != "a" || h.read("acme/notes/c.txt") != "c" {
		t.Fatal("the retried calls did not run")
	}
}

func TestHeldCallRetryAnswersItsCurrentState(t *testing.T) {
	t.Parallel()
	h := start(t)
	alice := h.token("acme", "alice", "developer")
	bob := h.token("acme", "bob", "approver")
	body := `{"arguments":{"path":"release/VERSION","content":"2"},"session_id":"s-1","call_id":"rel-2"}`
	first := h.call(alice, "write-file", body)
	id := approvalID(t, first)
	// Pending: the recorded response, and nothing held a second time.
	sameResponse(t, "retry while held", first, h.call(alice, "write-file", body))
	l := h.do("GET", "/v1/approvals", bob, nil)
	if list, _ := l.body["approvals"].([]any); len(list) != 1 {
		t.Fatalf("approvals after the retry: %s", l.raw)
	}
	if ok := h.do("POST", "/v1/approvals/"+id+"/approve", bob, nil); ok.status != 200 || ok.str("outcome") != "ok" {
		t.Fatalf("approve: %d %s", ok.status, ok.raw)
	}
	// Approved and run: the retry answers the tool's result.
	r := h.call(alice, "write-file", body)
	if r.status != 200 || r.str("outcome") != "ok" || r.str("content") != "wrote 1 bytes to release/VERSION" ||
		r.str("decision_id") != first.str("decision_id") || r.body["is_error"] != false {
		t.Fatalf("retry after approval: %d %s", r.status, r.raw)
	}
	if h.release() != "2" {
		t.Fatalf("release/VERSION = %q", h.release())
	}

	// Denied: the retry says so, and holds nothing again.
	body3 := strings.Replace(body, `"rel-2"`, `"rel-3"`, 1)
	held := h.call(alice, "write-file", body3)
	if d := h.do("POST", "/v1/approvals/"+approvalID(t, held)+"/deny", bob, nil); d.status != 200 {
		t.Fatalf("deny: %d %s", d.status, d.raw)
	}
	r = h.call(alice, "write-file", body3)
	data, _ := r.body["data"].(map[string]any)
	if r.status != 200 || r.str("outcome") != "denied" || r.str("content") != "permission denied" || data["status"] != "denied" {
		t.Fatalf("retry after denial: %d %s", r.status, r.raw)
	}
	l = h.do("GET", "/v1/approvals", bob, nil)
	if list, _ := l.body["approvals"].([]any); len(list) != 2 {
		t.Fatalf("approvals: %s", l.raw)
	}
}

func TestRetryOfAnUnfinishedCallSaysWhetherItRan(t *testing.T) {
	t.Parallel()
	h := start(t)
	alice := h.token("acme", "alice", "developer")
	// A gateway reserved these keys and stopped before it answered: one
	// before its decision, one after its allow decision was committed.
	args := `{"path":"notes/crash.txt","content":"x"}`
	fp := idempotency.Fingerprint(idempotency.Request{Mode: "call", Tool: "write-file", Arguments: []byte(args), Principal: "alice"})
	past := time.Now().Add(-pipeline.DefaultKeyLease - time.Minute)
	for _, k := range []string{"crash-early", "crash-late", "crash-ran"} {
		cur, err := h.g.db.Idempotency().Reserve(t.Context(), &idempotency.Key{Tenant: "acme", CallID: k, Fingerprint: fp,
			DecisionID: "d-" + k, State: idempotency.StatePending, CreatedAt: past, LeaseUntil: past.Add(pipeline.DefaultKeyLease),
			ExpiresAt: past.Add(48 * time.Hour)}, past)
		if err != nil || cur != nil {
			t.Fatalf("reserve %s: %+v %v", k, cur, err)
		}
	}
	event := func(callID, phase, outcome string) {
		must(t, h.g.audit.Append(t.Context(), &audit.Event{Tenant: "acme", Principal: "alice", CallID: callID, DecisionID: "d-" + callID,
			Tool: "write-file", Action: "fs.write", Phase: phase, Outcome: outcome, Reasons: []string{},
			Input: map[string]any{}, DurationsUS: map[string]int64{}}))
	}
	event("crash-late", audit.PhaseDecision, "allow")
	event("crash-ran", audit.PhaseDecision, "allow")
	event("crash-ran", audit.PhaseResult, "ok")

	before := h.snapshot()
	for _, tc := range []struct{ callID, says string }{
		{"crash-early", "it stopped before it was allowed, so nothing ran"},
		{"crash-late", "its allow decision was committed, so the tool may have run: see the audit events of its decision_id; nothing"},
		{"crash-ran", "so the tool may have run: see the audit events of its decision_id (the last of them says ok)"},
	} {
		r := h.call(alice, "write-file", `{"arguments":`+args+`,"call_id":"`+tc.callID+`"}`)
		e, _ := r.body["error"].(map[string]any)
		if r.status != 409 || r.errCode() != "unfinished" || !strings.Contains(string(r.raw), tc.says) ||
			e["call_id"] != tc.callID || e["decision_id"] != "d-"+tc.callID {
			t.Fatalf("%s: %d %s", tc.callID, r.status, r.raw)
		}
	}
	h.assertUnchanged(before)
	c, err := client.New(h.base, alice)
	must(t, err)
	_, err = c.Call(t.Context(), "write-file", map[string]any{"path": "notes/crash.txt", "content": "x"}, &client.CallOptions{CallID: "crash-early"})
	var ce *client.Error
	if !client.IsUnfinished(err) || !errors.As(err, &ce) || ce.DecisionID != "d-crash-early" {
		t.Fatalf("SDK: %v", err)
	}
	if got := h.idempotencyMetric("unfinished"); got != "4" {
		t.Fatalf("unfinished = %s, want 4", got)
	}
	// Other arguments are still a conflict, not an unfinished call.
	if r := h.call(alice, "write-file", `{"arguments":{"path":"notes/crash.txt","content":"y"},"call_id":"crash-early"}`); r.status != 409 || r.errCode() != "conflict" {
		t.Fatalf("other arguments: %d %s", r.status, r.raw)
	}
}

func TestKeysArePrunedAfterTheirTTL(t *testing.T) {
	t.Parallel()
	h := start(t, func(s *setup) { s.limitYAML = "  idempotency_ttl: 2h\n" })
	alice := h.token("acme", "alice", "developer")
	body := `{"arguments":{"path":"notes/ttl.txt","content":"x"},"call_id":"ttl-1"}`
	first := h.call(alice, "write-file", body)
	if first.status != 200 || first.str("outcome") != "ok" {
		t.Fatalf("first: %d %s", first.status, first.raw)
	}
	// Kept for its TTL: a prune an hour later keeps it.
	h.g.pipeline.PruneKeys(t.Context(), time.Now().Add(time.Hour))
	sameResponse(t, "retry within the TTL", first, h.call(alice, "write-file", body))
	// Past its TTL it is pruned, and the call_id is free again.
	h.g.pipeline.PruneKeys(t.Context(), time.Now().Add(2*time.Hour+time.Minute))
	if _, err := h.g.db.Idempotency().Get(t.Context(), "acme", "ttl-1"); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("key after its TTL: %v", err)
	}
	again := h.call(alice, "write-file", body)
	if again.status != 200 || again.str("outcome") != "ok" || again.str("decision_id") == first.str("decision_id") {
		t.Fatalf("after the TTL: %d %s, want a new decision", again.status, again.raw)
	}
}

func TestExpiredHeldCallRetryIsDeniedNotHeldAgain(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	h := start(t, func(s *setup) { s.extraYAML = "approvals:\n  ttl: 300ms\n"; s.clock = clock })
	alice := h.token("acme", "alice", "developer")
	body := `{"arguments":{"path":"release/VERSION","content":"2"},"session_id":"s-1","call_id":"rel-x"}`
	id := approvalID(t, h.call(alice, "write-file", body))
	clock.Advance(600 * time.Millisecond) // past the expiry
	r := h.call(alice, "write-file", body)
	data, _ := r.body["data"].(map[string]any)
	if r.status != 200 || r.str("outcome") != "denied" || r.str("content") != "permission denied" ||
		data["status"] != "expired" || data["approval_id"] != id {
		t.Fatalf("retry after expiry: %d %s", r.status, r.raw)
	}
	if got := h.phases("acme", "rel-x"); strings.Join(got, " ") != "decision:approval_required approval:expired" {
		t.Fatalf("audit of rel-x: %v: the retry was decided or held again", got)
	}
	if h.release() != "1\n" {
		t.Fatal("the expired call ran")
	}
}

func TestAskUserRetryAnswersTheAnswerOnceGiven(t *testing.T) {
	t.Parallel()
	h := start(t, withAskUser)
	alice := h.token("acme", "alice", "developer")
	body := `{"arguments":{"question":"Which branch?"},"session_id":"s-1","call_id":"ask-1"}`
	first := h.call(alice, "ask-user", body)
	qid, _ := first.body["data"].(map[string]any)["question_id"].(string)
	if first.status != 200 || first.str("outcome") != "awaiting_user" || qid == "" {
		t.Fatalf("ask: %d %s", first.status, first.raw)
	}
	sameResponse(t, "retry while the question waits", first, h.call(alice, "ask-user", body))
	if r := h.answer(alice, qid, "main"); r.status != 200 {
		t.Fatalf("answer: %d %s", r.status, r.raw)
	}
	r := h.call(alice, "ask-user", body)
	data, _ := r.body["data"].(map[string]any)
	if r.status != 200 || r.str("outcome") != "ok" || r.str("content") != "main" || r.body["is_error"] != false ||
		r.str("decision_id") != first.str("decision_id") || data["question_id"] != qid || data["answered_by"] != "alice" {
		t.Fatalf("retry after the answer: %d %s", r.status, r.raw)
	}
	// One question was asked, once.
	if got := h.phases("acme", "ask-1"); strings.Join(got, " ") != "decision:allow result:awaiting_user question:answered" {
		t.Fatalf("audit of ask-1: %v", got)
	}
}
