package client_test

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/tlog"
	"github.com/toolgate/toolgate/sdk/client"
)

func gatewayT(t *testing.T) *testGateway {
	t.Helper()
	gw, err := startGateway()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.stop)
	return gw
}

func clientT(t *testing.T, gw *testGateway, tenant, sub string, roles ...string) *client.Client {
	t.Helper()
	c, err := client.New(gw.URL, gw.token(tenant, sub, roles...))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// traffic makes calls whose events carry every optional member: a
// decision with obligations, the policy's result and a shadow verdict; a
// result; a held call with its approval steps; an ask-user question and
// its answer; a denial; invalid arguments.
func traffic(t *testing.T, gw *testGateway) {
	t.Helper()
	ctx := context.Background()
	alice := clientT(t, gw, "acme", "alice", "developer")
	bob := clientT(t, gw, "acme", "bob", "developer", "approver")
	if r, err := alice.Call(ctx, "read-file", map[string]string{"path": "docs/guide.md"}, &client.CallOptions{SessionID: "s-1"}); err != nil || r.Outcome != "ok" {
		t.Fatalf("read-file: %+v %v", r, err)
	}
	held, err := alice.Call(ctx, "write-file", map[string]string{"path": "release/VERSION", "content": "2\n"}, nil)
	if err != nil || held.Outcome != "approval_required" {
		t.Fatalf("write-file: %+v %v", held, err)
	}
	if a, err := bob.Approve(ctx, held.Data["approval_id"].(string), "ok"); err != nil || a.Status != "approved" {
		t.Fatalf("approve: %+v %v", a, err)
	}
	asked, err := alice.Call(ctx, "ask-user", map[string]any{"question": "Ship?", "options": []string{"yes", "no"}}, nil)
	if err != nil || asked.Outcome != "awaiting_user" {
		t.Fatalf("ask-user: %+v %v", asked, err)
	}
	if _, err := alice.Answer(ctx, asked.Data["question_id"].(string), "yes"); err != nil {
		t.Fatal(err)
	}
	if r, err := alice.Call(ctx, "read-file", map[string]string{"path": "secrets/db.env"}, nil); err != nil || r.Outcome != "denied" {
		t.Fatalf("denied read: %+v %v", r, err)
	}
	if r, err := alice.Call(ctx, "read-file", map[string]any{"path": 7}, nil); err != nil || r.Outcome != "invalid_arguments" {
		t.Fatalf("invalid read: %+v %v", r, err)
	}
}

// Events decoded through the SDK hash to their hash: the SDK's AuditEvent
// is the server's own type, so no member the server hashed is lost
// (approval, question, shadow, obligations, decision, result included) —
// read one by one, page by page, and streamed by the export.
func TestEventsDecodedThroughTheSDKReHashToTheirHash(t *testing.T) {
	gw := gatewayT(t)
	traffic(t, gw)
	ctx := context.Background()
	aud := clientT(t, gw, "acme", "carol", "auditor")
	v, err := aud.VerifyAudit(ctx) // integrates what is committed
	if err != nil || !v.OK {
		t.Fatalf("verify: %+v %v", v, err)
	}

	var listed []*client.AuditEvent
	for q := (client.AuditQuery{Limit: 3}); ; {
		page, err := aud.AuditEvents(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, page.Events...)
		if q.Cursor = page.NextCursor; q.Cursor == "" {
			break
		}
	}
	var exported []*client.AuditEvent
	if err := aud.ExportEvents(ctx, time.Time{}, time.Time{}, func(ev *client.AuditEvent) error {
		exported = append(exported, ev)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(listed) != v.EventsChecked || len(exported) != len(listed) {
		t.Fatalf("listed %d, exported %d, verify checked %d", len(listed), len(exported), v.EventsChecked)
	}
	seen := map[string]int{}
	for _, set := range [][]*client.AuditEvent{listed, exported} {
		for _, ev := range set {
			h, err := ev.ComputeHash()
			if err != nil || h != ev.Hash {
				b, _ := json.Marshal(ev)
				t.Fatalf("event %s re-hashes to %s (%v), says %s:\n%s", ev.ID, h, err, ev.Hash, b)
			}
			one, err := aud.AuditEvent(ctx, ev.ID)
			if err != nil {
				t.Fatal(err)
			}
			if h, _ := one.ComputeHash(); h != ev.Hash {
				t.Fatalf("event %s read alone re-hashes to %s", ev.ID, h)
			}
			for member, has := range map[string]bool{
				"approval": ev.Approval != nil, "question": ev.Question != nil, "shadow": ev.Shadow != nil,
				"obligations": len(ev.Obligations) > 0, "result": ev.Result != nil, "decision": ev.Decision != nil,
				"log_index": ev.LogIndex != nil,
			} {
				if has {
					seen[member]++
				}
			}
		}
	}
	for _, member := range []string{"approval", "question", "shadow", "obligations", "result", "decision", "log_index"} {
		if seen[member] == 0 {
			t.Errorf("no event carried %s: the test would not notice it dropped", member)
		}
	}

	// The guarantee can fail: a changed member, or a type that lacks a
	// member (as this SDK's AuditEvent lacked approval, question and
	// shadow), no longer hashes to the event's hash.
	var approvalEvent *client.AuditEvent
	for _, ev := range listed {
		if ev.Approval != nil {
			approvalEvent = ev
			break
		}
	}
	tampered := *approvalEvent
	tampered.Reasons = append([]string{"edited"}, tampered.Reasons...)
	if h, _ := tampered.ComputeHash(); h == approvalEvent.Hash {
		t.Fatal("an edited event still hashes to its hash")
	}
	dropped := *approvalEvent
	dropped.Approval = nil
	if h, _ := dropped.ComputeHash(); h == approvalEvent.Hash {
		t.Fatal("an event that lost its approval member still hashes to its hash")
	}
	// The same check through the raw JSON the API answers: an old
	// hand-written copy of the type drops members silently.
	raw := getRaw(t, gw.URL+"/v1/audit/events/"+approvalEvent.ID, gw.token("acme", "carol", "auditor"))
	var old struct {
		ID          string           `json:"id"`
		Time        string           `json:"time"`
		Tenant      string           `json:"tenant"`
		Principal   string           `json:"principal"`
		CallID      string           `json:"call_id"`
		DecisionID  string           `json:"decision_id"`
		SessionID   string           `json:"session_id"`
		Tool        string           `json:"tool"`
		Action      string           `json:"action"`
		Phase       string           `json:"phase"`
		Outcome     string           `json:"outcome"`
		Reasons     []string         `json:"reasons"`
		Revision    string           `json:"policy_revision"`
		Digest      string           `json:"request_digest"`
		Input       map[string]any   `json:"input"`
		Obligations map[string]any   `json:"obligations,omitempty"`
		DurationsUS map[string]int64 `json:"durations_us"`
		Chain       string           `json:"chain"`
		Seq         int64            `json:"seq"`
		PrevHash    string           `json:"prev_hash"`
		Hash        string           `json:"hash"`
	}
	if err := json.Unmarshal(raw, &old); err != nil {
		t.Fatal(err)
	}
	oldJSON, _ := json.Marshal(old)
	if h, _ := apiv1.HashOf(oldJSON); h == approvalEvent.Hash {
		t.Fatal("a type without approval re-hashes an approval event to its hash")
	}
	if h, _ := apiv1.HashOf(raw); h != approvalEvent.Hash {
		t.Fatalf("the raw answer re-hashes to %s, not %s", h, approvalEvent.Hash)
	}
}

func getRaw(t *testing.T, url, token string) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	return b
}

// Batches, held calls with long-polls, approvals and denials, questions,
// checkpoints and proofs, through the SDK against a real gateway.
func TestSDKCoversThePlatformAPI(t *testing.T) {
	gw := gatewayT(t)
	ctx := context.Background()
	alice := clientT(t, gw, "acme", "alice", "developer")
	bob := clientT(t, gw, "acme", "bob", "developer", "approver")

	t.Run("batches", func(t *testing.T) {
		calls := []client.BatchCall{
			{Tool: "read-file", Arguments: map[string]string{"path": "docs/guide.md"}, CallID: "b-1"},
			{Tool: "read-file", Arguments: map[string]string{"path": "secrets/db.env"}},
			{Tool: "nope"},
		}
		res, err := alice.Batch(ctx, "s-b", calls)
		if err != nil || len(res) != 3 || res[0].Outcome != "ok" || res[0].CallID != "b-1" || res[1].Outcome != "denied" || res[2].Outcome != "unavailable" {
			t.Fatalf("batch: %+v %v", res, err)
		}
		// Calls and decisions share the tenant's call_ids: the decisions
		// get their own.
		decide := append([]client.BatchCall(nil), calls[:2]...)
		decide[0].CallID = "b-1-decision"
		dec, err := alice.DecideBatch(ctx, "s-b", decide)
		if err != nil || len(dec) != 2 || dec[0].Outcome != "allow" || !strings.HasPrefix(dec[0].RequestDigest, "sha256:") || dec[1].Outcome != "denied" {
			t.Fatalf("decide batch: %+v %v", dec, err)
		}
		_, err = alice.Batch(ctx, "", nil)
		var e *client.Error
		if !errors.As(err, &e) || e.Status != 400 || !errors.Is(err, client.ErrInvalidRequest) {
			t.Fatalf("empty batch: %v", err)
		}
	})

	t.Run("held call, long-poll, approve and deny", func(t *testing.T) {
		held, err := alice.Call(ctx, "write-file", map[string]string{"path": "release/VERSION", "content": "3\n"}, nil)
		if err != nil || held.Outcome != "approval_required" {
			t.Fatalf("%+v %v", held, err)
		}
		st, err := alice.CallStatus(ctx, held.CallID, 0)
		if err != nil || st.Outcome != client.OutcomePending || st.ApprovalID != held.Data["approval_id"] || st.Content != nil {
			t.Fatalf("status: %+v %v", st, err)
		}
		var wg sync.WaitGroup
		var polled *client.CallStatus
		var pollErr error
		wg.Add(1)
		go func() { defer wg.Done(); polled, pollErr = alice.WaitForCall(ctx, held.CallID) }()
		list, err := bob.Approvals(ctx, client.ApprovalQuery{Status: "pending", Limit: 10})
		if err != nil || len(list) != 1 || list[0].CallID != held.CallID {
			t.Fatalf("pending approvals: %+v %v", list, err)
		}
		one, err := bob.Approval(ctx, list[0].ID)
		if err != nil || one.Input["args"].(map[string]any)["content"] != "**masked**" {
			t.Fatalf("approval: %+v %v", one, err)
		}
		if _, err := alice.Approve(ctx, one.ID, ""); !errors.Is(err, client.ErrForbidden) {
			t.Fatalf("self-approval without the role: %v", err)
		}
		done, err := bob.Approve(ctx, one.ID, "fine")
		if err != nil || done.Status != "approved" || done.Outcome != "ok" || done.DecidedBy != "bob" {
			t.Fatalf("approve: %+v %v", done, err)
		}
		wg.Wait()
		if pollErr != nil || polled.Outcome != "ok" || polled.Content == nil || *polled.Content != "wrote 2 bytes to release/VERSION" {
			t.Fatalf("long-poll: %+v %v", polled, pollErr)
		}
		if _, err := bob.Deny(ctx, one.ID, ""); !errors.Is(err, client.ErrConflict) {
			t.Fatalf("deny after approve: %v", err)
		}
		if _, err := bob.Approval(ctx, "no-such-approval"); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("unknown approval: %v", err)
		}

		held2, _ := alice.Call(ctx, "write-file", map[string]string{"path": "release/VERSION", "content": "4\n"}, nil)
		denied, err := bob.Deny(ctx, held2.Data["approval_id"].(string), "not now")
		if err != nil || denied.Status != "denied" || denied.Comment != "not now" {
			t.Fatalf("deny: %+v %v", denied, err)
		}
		if st, err := alice.WaitForCall(ctx, held2.CallID); err != nil || st.Outcome != "denied" {
			t.Fatalf("denied call: %+v %v", st, err)
		}
	})

	t.Run("questions", func(t *testing.T) {
		asked, err := alice.Call(ctx, "ask-user", map[string]any{"question": "Color?", "options": []string{"red", "blue"}}, nil)
		if err != nil || asked.Outcome != "awaiting_user" {
			t.Fatalf("%+v %v", asked, err)
		}
		qid := asked.Data["question_id"].(string)
		if l, err := alice.Questions(ctx, 0); err != nil || len(l) != 1 || l[0].ID != qid || l[0].Text != "Color?" || len(l[0].Options) != 2 {
			t.Fatalf("the asker's questions: %+v %v", l, err)
		}
		if l, err := clientT(t, gw, "globex", "alice", "developer").Questions(ctx, 0); err != nil || len(l) != 0 {
			t.Fatalf("another tenant's alice sees questions: %+v %v", l, err)
		}
		if _, err := alice.Answer(ctx, qid, "green"); !errors.Is(err, client.ErrInvalidRequest) {
			t.Fatalf("answer not offered: %v", err)
		}
		q, err := alice.Answer(ctx, qid, "blue")
		if err != nil || q.Status != "answered" || q.AnsweredBy != "alice" {
			t.Fatalf("answer: %+v %v", q, err)
		}
		if _, err := alice.Answer(ctx, qid, "red"); !errors.Is(err, client.ErrConflict) {
			t.Fatalf("second answer: %v", err)
		}
		if _, err := clientT(t, gw, "globex", "alice", "developer").Answer(ctx, qid, "red"); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("another tenant's question: %v", err)
		}
		st, err := alice.CallStatus(ctx, asked.CallID, 5*time.Second)
		if err != nil || st.Outcome != "ok" || *st.Content != "blue" || st.QuestionID != qid {
			t.Fatalf("answered call: %+v %v", st, err)
		}
	})

	t.Run("checkpoints and proofs", func(t *testing.T) {
		aud := clientT(t, gw, "acme", "carol", "auditor")
		if _, err := aud.VerifyAudit(ctx); err != nil {
			t.Fatal(err)
		}
		var note []byte
		for deadline := time.Now().Add(20 * time.Second); ; {
			var err error
			note, err = aud.Checkpoint(ctx)
			if err == nil {
				break
			}
			wait, ok := client.RetryAfter(err)
			if !ok || !errors.Is(err, client.ErrUnavailable) || time.Now().After(deadline) {
				t.Fatalf("checkpoint: %v", err)
			}
			time.Sleep(wait)
		}
		vkey, err := aud.VerifierKey(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ver, err := tlog.NewVerifier(vkey)
		if err != nil {
			t.Fatal(err)
		}
		cp, err := ver.Open(note, tlog.Origin("acme"))
		if err != nil {
			t.Fatal(err)
		}
		page, err := aud.AuditEvents(ctx, client.AuditQuery{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		proved := 0
		for _, ev := range page.Events {
			if ev.LogIndex == nil || uint64(*ev.LogIndex) >= cp.Size {
				continue
			}
			p, err := aud.InclusionProof(ctx, ev.ID, cp.Size)
			if err != nil {
				t.Fatal(err)
			}
			leaf, _ := hex.DecodeString(strings.TrimPrefix(ev.Hash, "sha256:"))
			if err := tlog.VerifyInclusion(tlog.InclusionProof(*p), leaf, cp); err != nil {
				t.Fatalf("event %s: %v", ev.ID, err)
			}
			proved++
		}
		if proved == 0 {
			t.Fatal("no event proved")
		}
		if cp.Size > 1 {
			p, err := aud.ConsistencyProof(ctx, 1, cp.Size)
			if err != nil || p.From != 1 || p.To != cp.Size {
				t.Fatalf("consistency: %+v %v", p, err)
			}
		}
		v, err := aud.VerifyCheckpoint(ctx, note)
		// CheckpointSize is the largest checkpoint checked: this one, or a
		// later one the gateway signed meanwhile (events still integrating).
		if err != nil || !v.OK || v.CheckpointSize < int64(cp.Size) || v.TreeSize < int64(cp.Size) {
			t.Fatalf("verify against the checkpoint: %+v %v", v, err)
		}
		forged := []byte(strings.Replace(string(note), "acme", "acmf", 1))
		if _, err := aud.VerifyCheckpoint(ctx, forged); !errors.Is(err, client.ErrInvalidRequest) {
			t.Fatalf("forged checkpoint: %v", err)
		}
		if _, err := aud.InclusionProof(ctx, "no-such-event", cp.Size); !errors.Is(err, client.ErrNotFound) {
			t.Fatalf("proof of an unknown event: %v", err)
		}
	})

	t.Run("failures are typed", func(t *testing.T) {
		bad, _ := client.New(gw.URL, "not-a-token")
		if _, err := bad.ListTools(ctx, ""); !errors.Is(err, client.ErrUnauthenticated) {
			t.Fatalf("bad token: %v", err)
		}
		if _, err := alice.VerifyAudit(ctx); !errors.Is(err, client.ErrForbidden) {
			t.Fatalf("developer reads audit: %v", err)
		}
		_, err := alice.Call(ctx, "write-file", map[string]string{"path": "notes/big", "content": strings.Repeat("x", 2<<20)}, nil)
		var e *client.Error
		if !errors.As(err, &e) || e.Status != 413 || e.Code != "too_large" || !errors.Is(err, client.ErrInvalidRequest) {
			t.Fatalf("oversized call: %v", err)
		}
		if _, err := alice.Call(ctx, "read-file", []int{1}, nil); err != nil {
			t.Fatalf("non-object arguments are the model's mistake, not an error: %v", err)
		}
	})
}

// 429 with Retry-After (seconds or an HTTP date) is ErrRateLimited with
// RetryAfter; 409 is ErrConflict. A stand-in server answers as the gateway
// does, until rate limiting lands in this branch's gateway.
func TestRateLimitAndConflictAreTyped(t *testing.T) {
	var mu sync.Mutex
	retry := "7"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.URL.Path, "conflict") {
			w.WriteHeader(409)
			io.WriteString(w, `{"error":{"code":"conflict","message":"call_id was used with other arguments"}}`)
			return
		}
		mu.Lock()
		w.Header().Set("Retry-After", retry)
		mu.Unlock()
		w.WriteHeader(429)
		io.WriteString(w, `{"error":{"code":"rate_limited","message":"rate limit exceeded"}}`)
	}))
	defer srv.Close()
	c, _ := client.New(srv.URL, "t")
	_, err := c.Call(context.Background(), "read-file", nil, nil)
	wait, ok := client.RetryAfter(err)
	if !errors.Is(err, client.ErrRateLimited) || !ok || wait != 7*time.Second || errors.Is(err, client.ErrConflict) {
		t.Fatalf("429: %v, retry after %v %v", err, wait, ok)
	}
	mu.Lock()
	retry = time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	mu.Unlock()
	_, err = c.Call(context.Background(), "read-file", nil, nil)
	if wait, ok := client.RetryAfter(err); !ok || wait < 80*time.Second || wait > 91*time.Second {
		t.Fatalf("429 with a date: retry after %v %v", wait, ok)
	}
	for _, garbage := range []string{"-5", "soon", ""} {
		mu.Lock()
		retry = garbage
		mu.Unlock()
		_, err = c.Call(context.Background(), "read-file", nil, nil)
		if _, ok := client.RetryAfter(err); ok || !errors.Is(err, client.ErrRateLimited) {
			t.Fatalf("Retry-After %q: %v", garbage, err)
		}
	}
	_, err = c.Call(context.Background(), "conflict", nil, &client.CallOptions{CallID: "c-1"})
	var e *client.Error
	if !errors.Is(err, client.ErrConflict) || !errors.As(err, &e) || e.Code != "conflict" {
		t.Fatalf("409: %v", err)
	}
}

// An export the gateway ended with its error line is ErrExportInterrupted
// after the lines before it; a line that is not an event is an error, not
// a silently empty event. A stand-in server streams what the gateway
// streams when its store fails mid-export.
func TestExportEndsWithTheGatewaysErrorLine(t *testing.T) {
	lines := ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		io.WriteString(w, lines)
	}))
	defer srv.Close()
	c, _ := client.New(srv.URL, "t")
	ev := `{"id":"e-1","time":"2026-12-03T08:00:00.000Z","tenant":"acme","phase":"decision","outcome":"allow","hash":"sha256:00"}` + "\n"
	var got []string
	lines = ev + ev + `{"error":{"code":"unavailable","message":"export interrupted"}}` + "\n"
	err := c.ExportEvents(context.Background(), time.Time{}, time.Time{}, func(e *client.AuditEvent) error {
		got = append(got, e.ID)
		return nil
	})
	if !errors.Is(err, client.ErrExportInterrupted) || len(got) != 2 {
		t.Fatalf("interrupted export: %v after %v", err, got)
	}
	for _, bad := range []string{"not json\n", `{"id":1}` + "\n", `[1]` + "\n"} {
		lines = bad
		if err := c.ExportEvents(context.Background(), time.Time{}, time.Time{}, func(*client.AuditEvent) error { return nil }); err == nil {
			t.Errorf("garbage line %q decoded without error", bad)
		}
	}
	stop := errors.New("stop")
	lines = ev + ev
	n := 0
	if err := c.ExportEvents(context.Background(), time.Time{}, time.Time{}, func(*client.AuditEvent) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("fn's error: %v after %d", err, n)
	}
}
