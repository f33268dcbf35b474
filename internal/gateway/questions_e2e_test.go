package gateway

import (
	"strings"
	"testing"
)

const askTools = "tools:\n  builtin: [read-file, ask-user]\n"

func withAskUser(s *setup) { s.toolsYAML = askTools }

// ask makes an ask-user call and returns its call id and question id.
func (h *harness) ask(token, args string) (callID, questionID string) {
	h.t.Helper()
	r := h.call(token, "ask-user", `{"arguments":`+args+`,"session_id":"s-1"}`)
	data, _ := r.body["data"].(map[string]any)
	questionID, _ = data["question_id"].(string)
	if r.status != 200 || r.str("outcome") != "awaiting_user" || r.str("content") != "awaiting user" || r.body["is_error"] != false || questionID == "" || data["expires_at"] == nil {
		h.t.Fatalf("ask-user call: %d %s", r.status, r.raw)
	}
	return r.str("call_id"), questionID
}

func (h *harness) answer(token, questionID, answer string) response {
	h.t.Helper()
	return h.do("POST", "/v1/questions/"+questionID+"/answer", token, []byte(`{"answer":`+quote(answer)+`}`))
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }

func TestAskUserAnswerIsTheCallsResult(t *testing.T) {
	t.Parallel()
	h := start(t, withAskUser)
	alice := h.token("acme", "alice", "developer")
	callID, qid := h.ask(alice, `{"question":"Which branch should I deploy?"}`)

	if p := h.do("GET", "/v1/calls/"+callID, alice, nil); p.status != 200 || p.str("outcome") != "pending" || p.str("question_id") != qid {
		t.Fatalf("poll before the answer: %d %s", p.status, p.raw)
	}
	if r := h.answer(alice, qid, "main"); r.status != 200 || r.str("status") != "answered" || r.str("answered_by") != "alice" || r.str("call_id") != callID {
		t.Fatalf("answer: %d %s", r.status, r.raw)
	}
	p := h.do("GET", "/v1/calls/"+callID, alice, nil)
	if p.status != 200 || p.str("outcome") != "ok" || p.str("content") != "main" || p.body["is_error"] != false {
		t.Fatalf("poll after the answer: %d %s", p.status, p.raw)
	}

	// decision, result (awaiting_user), answer: chained like every event.
	var steps []string
	for _, ev := range h.events("acme", "call_id="+callID) {
		steps = append(steps, ev["phase"].(string)+"/"+ev["outcome"].(string))
	}
	if got := strings.Join(steps, " "); got != "question/answered result/awaiting_user decision/allow" {
		t.Fatalf("audit events of the call: %s", got)
	}
	h.verify("acme")
}

func TestWhoMayAnswerAQuestion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, tenant, sub string
		roles             []string
		want              int
	}{
		{"another principal of the tenant", "acme", "bob", []string{"developer"}, 404},
		{"an approver", "acme", "bob", []string{"approver"}, 404},
		{"another tenant's principal of the same name", "globex", "alice", []string{"developer", "answerer"}, 404},
		{"a principal with the answerer role", "acme", "support", []string{"answerer"}, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, withAskUser)
			alice := h.token("acme", "alice", "developer")
			callID, qid := h.ask(alice, `{"question":"Deploy now?"}`)
			who := h.token(tc.tenant, tc.sub, tc.roles...)
			if r := h.answer(who, qid, "yes"); r.status != tc.want {
				t.Fatalf("answer: %d %s, want %d", r.status, r.raw, tc.want)
			}
			// Only the asker polls the call, whoever answered it.
			if r := h.do("GET", "/v1/calls/"+callID, who, nil); r.status != 404 {
				t.Fatalf("poll by %s/%s: %d %s", tc.tenant, tc.sub, r.status, r.raw)
			}
			wantOutcome := map[int]string{404: "pending", 200: "ok"}[tc.want]
			if p := h.do("GET", "/v1/calls/"+callID, alice, nil); p.str("outcome") != wantOutcome {
				t.Fatalf("asker's poll: %s, want %s", p.raw, wantOutcome)
			}
		})
	}
}

// A refused answer is indistinguishable from one to a question that does
// not exist, and policy's refusal is audited.
func TestAForeignQuestionLooksMissing(t *testing.T) {
	t.Parallel()
	h := start(t, withAskUser)
	alice := h.token("acme", "alice", "developer")
	callID, qid := h.ask(alice, `{"question":"Deploy now?"}`)
	bob := h.token("acme", "bob", "developer")
	refused := h.answer(bob, qid, "yes")
	missing := h.answer(bob, "no-such-question", "yes")
	if refused.status != 404 || string(refused.raw) != string(missing.raw) {
		t.Fatalf("refused %d %s, missing %d %s", refused.status, refused.raw, missing.status, missing.raw)
	}
	denied := h.events("acme", "call_id="+callID+"&phase=decision&outcome=denied")
	if len(denied) != 1 || denied[0]["question"].(map[string]any)["by"] != "bob" {
		t.Fatalf("audited second decision: %v", denied)
	}
}

func TestAQuestionIsAnsweredOnce(t *testing.T) {
	t.Parallel()
	h := start(t, withAskUser)
	alice := h.token("acme", "alice", "developer")
	callID, qid := h.ask(alice, `{"question":"Deploy now?"}`)
	if r := h.answer(alice, qid, "yes"); r.status != 200 {
		t.Fatalf("first answer: %d %s", r.status, r.raw)
	}
	if r := h.answer(alice, qid, "no"); r.status != 409 || r.errCode() != "conflict" {
		t.Fatalf("second answer: %d %s", r.status, r.raw)
	}
	if p := h.do("GET", "/v1/calls/"+callID, alice, nil); p.str("content") != "yes" {
		t.Fatalf("the first answer stands: %s", p.raw)
	}
}

func TestOnlyAnOfferedOptionAnswersAQuestionWithOptions(t *testing.T) {
	t.Parallel()
	h := start(t, withAskUser)
	alice := h.token("acme", "alice", "developer")
	callID, qid := h.ask(alice, `{"question":"Deploy now?","options":["yes","no"]}`)
	for _, bad := range []string{"maybe", "YES", "yes "} {
		if r := h.answer(alice, qid, bad); r.status != 400 || r.errCode() != "invalid_request" {
			t.Fatalf("answer %q: %d %s", bad, r.status, r.raw)
		}
	}
	if r := h.answer(alice, qid, "no"); r.status != 200 {
		t.Fatalf("offered answer: %d %s", r.status, r.raw)
	}
	if p := h.do("GET", "/v1/calls/"+callID, alice, nil); p.str("content") != "no" {
		t.Fatalf("poll: %s", p.raw)
	}
	// The arguments' own bounds: an invalid question never becomes one.
	many := `["a","b","c","d","e","f","g","h","i","j","k"]`
	for _, args := range []string{`{"question":""}`, `{"question":"q","options":` + many + `}`, `{"question":"q","options":["a","a"]}`, `{"question":"q","options":[]}`} {
		if r := h.call(alice, "ask-user", `{"arguments":`+args+`}`); r.str("outcome") != "invalid_arguments" {
			t.Fatalf("ask-user %s: %s", args, r.raw)
		}
	}
}

func TestAnswerBodiesAreStrict(t *testing.T) {
	t.Parallel()
	h := start(t, withAskUser)
	alice := h.token("acme", "alice", "developer")
	_, qid := h.ask(alice, `{"question":"Deploy now?"}`)
	for _, body := range []string{``, `{}`, `{"answer":""}`, `{"answer":1}`, `{"answer":"x","tenant":"globex"}`, `{"answer":"` + strings.Repeat("x", 4001) + `"}`} {
		if r := h.do("POST", "/v1/questions/"+qid+"/answer", alice, []byte(body)); r.status != 400 {
			t.Fatalf("body %.40q: %d %s", body, r.status, r.raw)
		}
	}
}

func TestLongPollReturnsTheAnswer(t *testing.T) {
	t.Parallel()
	h := start(t, withAskUser)
	alice := h.token("acme", "alice", "developer")
	callID, qid := h.ask(alice, `{"question":"Deploy now?"}`)

	// At the wait bound an unanswered call is still pending.
	if p := h.do("GET", "/v1/calls/"+callID+"?wait=1s", alice, nil); p.status != 200 || p.str("outcome") != "pending" {
		t.Fatalf("poll at the bound: %d %s", p.status, p.raw)
	}
	done := make(chan response, 1)
	go func() { done <- h.do("GET", "/v1/calls/"+callID+"?wait=30s", alice, nil) }()
	if r := h.answer(alice, qid, "go ahead"); r.status != 200 {
		t.Fatalf("answer: %d %s", r.status, r.raw)
	}
	if p := <-done; p.status != 200 || p.str("outcome") != "ok" || p.str("content") != "go ahead" {
		t.Fatalf("long poll: %d %s", p.status, p.raw)
	}
	for _, q := range []string{"?wait=61s", "?wait=-1s", "?wait=soon", "?wait=1s&wait=2s", "?timeout=1s"} {
		if p := h.do("GET", "/v1/calls/"+callID+q, alice, nil); p.status != 400 {
			t.Fatalf("poll %s: %d %s", q, p.status, p.raw)
		}
	}
}

// The long poll wakes when the question expires; then the question is
// gone for everyone, and its expiry is audited.
func TestAnExpiredQuestionLooksMissing(t *testing.T) {
	t.Parallel()
	h := start(t, withAskUser, func(s *setup) { s.extraYAML = "approvals:\n  question_ttl: 1s\n" })
	alice := h.token("acme", "alice", "developer")
	callID, qid := h.ask(alice, `{"question":"Deploy now?"}`)
	if p := h.do("GET", "/v1/calls/"+callID+"?wait=30s", alice, nil); p.status != 404 {
		t.Fatalf("long poll across the expiry: %d %s", p.status, p.raw)
	}
	if r := h.answer(alice, qid, "yes"); r.status != 404 {
		t.Fatalf("answer after expiry: %d %s", r.status, r.raw)
	}
	if ev := h.events("acme", "call_id="+callID+"&phase=question&outcome=expired"); len(ev) != 1 {
		t.Fatalf("expiry events: %v", ev)
	}
	h.verify("acme")
}

// GET /v1/questions lists what the caller may answer: the asker its own
// questions; a colleague without the answerer role nothing; one with it
// the tenant's; another tenant nothing. Bad parameters are 400.
func TestListQuestionsShowsWhatTheCallerMayAnswer(t *testing.T) {
	t.Parallel()
	h := start(t, withAskUser)
	alice := h.token("acme", "alice", "developer")
	callID, qid := h.ask(alice, `{"question":"Deploy now?","options":["yes","no"]}`)

	r := h.do("GET", "/v1/questions", alice, nil)
	list, _ := r.body["questions"].([]any)
	if r.status != 200 || len(list) != 1 {
		t.Fatalf("the asker's questions: %d %s", r.status, r.raw)
	}
	q, _ := list[0].(map[string]any)
	if q["id"] != qid || q["call_id"] != callID || q["text"] != "Deploy now?" || q["principal"] != "alice" || q["tool"] != "ask-user" {
		t.Fatalf("the question: %v", q)
	}
	if _, leaked := q["input"]; leaked {
		t.Fatal("the request document left the gateway")
	}
	for _, who := range []string{h.token("acme", "dana", "developer"), h.token("globex", "alice", "developer")} {
		if r := h.do("GET", "/v1/questions", who, nil); r.status != 200 || len(r.body["questions"].([]any)) != 0 {
			t.Fatalf("someone who may not answer sees questions: %d %s", r.status, r.raw)
		}
	}
	if r := h.do("GET", "/v1/questions", h.token("acme", "support", "answerer"), nil); r.status != 200 || len(r.body["questions"].([]any)) != 1 {
		t.Fatalf("an answerer's questions: %d %s", r.status, r.raw)
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?limit=x", "?limit=1&limit=2", "?status=pending"} {
		if r := h.do("GET", "/v1/questions"+q, alice, nil); r.status != 400 || r.errCode() != "invalid_request" {
			t.Errorf("GET /v1/questions%s: %d %s", q, r.status, r.raw)
		}
	}
	if r := h.do("GET", "/v1/questions", "", nil); r.status != 401 {
		t.Fatalf("unauthenticated: %d", r.status)
	}
	h.answer(alice, qid, "yes")
	if r := h.do("GET", "/v1/questions", alice, nil); r.status != 200 || len(r.body["questions"].([]any)) != 0 {
		t.Fatalf("an answered question is still listed: %s", r.raw)
	}
}
