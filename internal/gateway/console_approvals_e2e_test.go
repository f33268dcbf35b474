package gateway

import (
	"html"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// section is the text of the page's <section id="id">, failing when the
// page has none.
func (p page) section(t *testing.T, id string) string {
	t.Helper()
	i := strings.Index(p.body, `<section id="`+id+`"`)
	if i < 0 {
		t.Fatalf("%s (%d) has no section#%s:\n%s", p.url, p.status, id, p.body)
	}
	j := strings.Index(p.body[i:], "</section>")
	if j < 0 {
		t.Fatalf("section#%s is not closed", id)
	}
	return p.body[i : i+j]
}

// item is the part of a section from the element with id to the next
// item (or the section's end), HTML entities decoded; "" when absent.
func item(sec, id string) string {
	i := strings.Index(sec, ` id="`+id+`"`)
	if i < 0 {
		return ""
	}
	rest := sec[i+1:]
	for _, next := range []string{`<div class="item"`, `<tr id="`} {
		if j := strings.Index(rest, next); j >= 0 {
			rest = rest[:j]
		}
	}
	return html.UnescapeString(rest)
}

// noFollow is a browser sharing b's session that does not follow
// redirects, to see a step's own status and Location.
func (b *browser) noFollow() *browser {
	c := *b.client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{t: b.t, h: b.h, client: &c}
}

func containsAll(t *testing.T, what, text string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("%s lacks %q:\n%s", what, w, text)
		}
	}
}

// The approver sees what will run — the held request document, its
// digest, who asked, the expiry — approves it with a comment through the
// console's form, and the call runs once, exactly as through the API.
func TestConsoleApproveRunsTheHeldCallOnce(t *testing.T) {
	t.Parallel()
	h := start(t)
	alice := h.token("acme", "alice", "developer")
	bob := h.token("acme", "bob", "approver")
	r := h.held(alice, "2")
	id, callID := approvalID(t, r), r.str("call_id")
	held := h.do("GET", "/v1/approvals/"+id, bob, nil)

	b := h.browser()
	b.signIn(bob)
	p := b.get("/console/approvals")
	if p.status != 200 {
		t.Fatalf("approvals page: %d\n%s", p.status, p.body)
	}
	assertConsoleHeaders(t, p)
	pending := p.section(t, "pending")
	for _, el := range []string{`id="approval-` + id + `"`, `id="approve-` + id + `"`, `id="deny-` + id + `"`,
		`<label for="comment-` + id + `"`, `id="comment-` + id + `" name="comment"`, `action="/console/approvals/` + id + `/approve"`} {
		if !strings.Contains(pending, el) {
			t.Errorf("section#pending lacks %s", el)
		}
	}
	containsAll(t, "the held call", item(pending, "approval-"+id),
		"write-file", "alice", "s-1", callID, "release/VERSION", "release/** need a human",
		held.str("request_digest"), held.str("policy_revision"), `datetime="`+held.str("expires_at")+`"`)
	if strings.Contains(p.section(t, "decided"), id) {
		t.Fatal("a pending call is listed as decided")
	}

	// The step answers 303 to the page with a fixed notice.
	step := b.noFollow().form("/console/approvals", "/console/approvals/"+id+"/approve", url.Values{"comment": {"release 2"}})
	if step.status != http.StatusSeeOther || step.header.Get("Location") != "/console/approvals?done=approved" {
		t.Fatalf("approve: %d Location %q\n%s", step.status, step.header.Get("Location"), step.body)
	}
	if got := h.release(); got != "2" {
		t.Fatalf("release/VERSION = %q after the console's approval, want the held content", got)
	}
	after := b.get("/console/approvals?done=approved")
	assertConsoleHeaders(t, after)
	containsAll(t, "the page after approving", after.body, `class="notice"`, "Approved.")
	if strings.Contains(after.section(t, "pending"), id) {
		t.Fatal("the approved call is still listed as pending")
	}
	containsAll(t, "the decided row", item(after.section(t, "decided"), "decided-"+id), "approved", "bob", "release 2", `outcome-ok">ok</span>`, "alice")

	a := h.do("GET", "/v1/approvals/"+id, bob, nil)
	if a.str("status") != "approved" || a.str("decided_by") != "bob" || a.str("comment") != "release 2" || a.str("outcome") != "ok" {
		t.Fatalf("the approval after the console's step: %s", a.raw)
	}
	if p := h.do("GET", "/v1/calls/"+callID, alice, nil); p.str("outcome") != "ok" || p.str("content") != "wrote 1 bytes to release/VERSION" {
		t.Fatalf("the caller's poll: %s", p.raw)
	}
	// The same chain of events as an approval through the API, with the
	// approver and the comment.
	evs := h.events("acme", "call_id="+callID)
	var steps []string
	for i := len(evs) - 1; i >= 0; i-- {
		steps = append(steps, evs[i]["phase"].(string)+":"+evs[i]["outcome"].(string))
	}
	if strings.Join(steps, " ") != "decision:approval_required decision:allow approval:approved result:ok" {
		t.Fatalf("audit steps: %v", steps)
	}
	ap := h.events("acme", "call_id="+callID+"&phase=approval")
	if info, _ := ap[0]["approval"].(map[string]any); len(ap) != 1 || ap[0]["principal"] != "bob" || info["by"] != "bob" || info["comment"] != "release 2" {
		t.Fatalf("approval event: %v", ap)
	}
	h.verify("acme")

	// A notice is one of the page's own texts, never the query's.
	if p := b.get("/console/approvals?done=%3Cb%3Epwned"); strings.Contains(p.body, "pwned") || strings.Contains(p.body, `class="notice"`) {
		t.Fatal("the page reflects the done parameter")
	}
}

func TestConsoleDenyNeverRunsTheHeldCall(t *testing.T) {
	t.Parallel()
	h := start(t)
	alice := h.token("acme", "alice", "developer")
	bob := h.token("acme", "bob", "approver")
	r := h.held(alice, "2")
	id, callID := approvalID(t, r), r.str("call_id")
	b := h.browser()
	b.signIn(bob)

	// A comment over the API's bound is refused before anything happens.
	long := b.form("/console/approvals", "/console/approvals/"+id+"/deny", url.Values{"comment": {strings.Repeat("x", 1001)}})
	if long.status != http.StatusBadRequest || !strings.Contains(long.body, "at most 1000 bytes") {
		t.Fatalf("oversized comment: %d\n%s", long.status, long.body)
	}
	assertConsoleHeaders(t, long)
	if a := h.do("GET", "/v1/approvals/"+id, bob, nil); a.str("status") != "pending" {
		t.Fatalf("a refused form decided the call: %s", a.raw)
	}

	p := b.form("/console/approvals", "/console/approvals/"+id+"/deny", url.Values{"comment": {"not on a Friday"}})
	if p.status != 200 || p.url.Path != "/console/approvals" || p.url.RawQuery != "done=denied" || !strings.Contains(p.body, "Denied.") {
		t.Fatalf("deny: %d at %s\n%s", p.status, p.url, p.body)
	}
	if h.release() != "1\n" {
		t.Fatal("a denied call ran")
	}
	row := item(p.section(t, "decided"), "decided-"+id)
	containsAll(t, "the decided row", row, "denied", "bob", "not on a Friday", "did not run")
	if poll := h.do("GET", "/v1/calls/"+callID, alice, nil); poll.str("outcome") != "denied" {
		t.Fatalf("the caller's poll: %s", poll.raw)
	}
	ev := h.events("acme", "call_id="+callID+"&phase=approval&outcome=denied")
	if info, _ := ev[0]["approval"].(map[string]any); len(ev) != 1 || info["by"] != "bob" || info["comment"] != "not on a Friday" {
		t.Fatalf("denial event: %v", ev)
	}
	if n := len(h.events("acme", "call_id="+callID+"&phase=result")); n != 0 {
		t.Fatalf("%d result events of a denied call", n)
	}
}

// A stale form — the page was open while the call was decided — is
// refused with 409 and the call runs only once.
func TestConsoleApprovingTwiceRunsOnce(t *testing.T) {
	t.Parallel()
	h := start(t)
	alice := h.token("acme", "alice", "developer")
	id := approvalID(t, h.held(alice, "2"))
	b := h.browser()
	b.signIn(h.token("acme", "bob", "approver"))
	stale := b.get("/console/approvals")
	csrf := stale.csrf(t)

	first := b.post("/console/approvals/"+id+"/approve", url.Values{"csrf": {csrf}})
	if first.status != 200 || first.url.RawQuery != "done=approved" {
		t.Fatalf("first approval: %d at %s", first.status, first.url)
	}
	must(t, os.WriteFile(filepath.Join(h.dir, "ws/acme/release/VERSION"), []byte("3"), 0o644))
	for _, action := range []string{"approve", "deny"} {
		again := b.post("/console/approvals/"+id+"/"+action, url.Values{"csrf": {csrf}, "comment": {"again"}})
		if again.status != http.StatusConflict || !strings.Contains(again.body, "already decided") || !strings.Contains(again.body, `<section id="pending"`) {
			t.Fatalf("%s a decided call: %d\n%s", action, again.status, again.body)
		}
		assertConsoleHeaders(t, again)
	}
	if got := h.release(); got != "3" {
		t.Fatalf("the held call ran again: release/VERSION = %q", got)
	}
	if n := len(h.events("acme", "phase=result")); n != 1 {
		t.Fatalf("%d result events, want 1", n)
	}
}

// Policy decides whether this approver may decide this call: nobody
// approves their own. The refusal is a 403 with the policy's message, and
// the call waits for someone else.
func TestConsoleSelfApprovalIsForbiddenByThePolicy(t *testing.T) {
	t.Parallel()
	h := start(t)
	alice := h.token("acme", "alice", "developer", "approver")
	id := approvalID(t, h.held(alice, "2"))
	b := h.browser()
	b.signIn(alice)
	p := b.form("/console/approvals", "/console/approvals/"+id+"/approve", nil)
	if p.status != http.StatusForbidden || !strings.Contains(p.body, "you cannot approve your own call") {
		t.Fatalf("self-approval: %d\n%s", p.status, p.body)
	}
	assertConsoleHeaders(t, p)
	if !strings.Contains(p.section(t, "pending"), `id="approval-`+id+`"`) {
		t.Fatal("the call no longer waits after a refused approval")
	}
	if h.release() != "1\n" {
		t.Fatal("a self-approved call ran")
	}
	if a := h.do("GET", "/v1/approvals/"+id, h.token("acme", "bob", "approver"), nil); a.str("status") != "pending" {
		t.Fatalf("after the refusal: %s", a.raw)
	}
}

// Without the approver role the page and its steps answer 403 and change
// nothing.
func TestConsoleApprovalsNeedTheApproverRole(t *testing.T) {
	t.Parallel()
	h := start(t)
	alice := h.token("acme", "alice", "developer")
	id := approvalID(t, h.held(alice, "2"))
	b := h.browser()
	home := b.signIn(h.token("acme", "dana", "developer", "auditor"))
	if strings.Contains(home.body, `href="/console/approvals"`) {
		t.Fatal("a developer's navigation links the approvals page")
	}
	p := b.get("/console/approvals")
	if p.status != http.StatusForbidden || strings.Contains(p.body, id) {
		t.Fatalf("GET as developer: %d", p.status)
	}
	assertConsoleHeaders(t, p)
	for _, action := range []string{"approve", "deny"} {
		if p := b.form("/console/", "/console/approvals/"+id+"/"+action, url.Values{"comment": {"x"}}); p.status != http.StatusForbidden {
			t.Errorf("POST %s as developer: %d", action, p.status)
		}
	}
	if a := h.do("GET", "/v1/approvals/"+id, h.token("acme", "bob", "approver"), nil); a.str("status") != "pending" {
		t.Fatalf("after the refused steps: %s", a.raw)
	}
	if h.release() != "1\n" {
		t.Fatal("the held call ran")
	}
}

// Another tenant's approver does not see the call, and its id does not
// exist for them.
func TestConsoleAnotherTenantsApprovalDoesNotExist(t *testing.T) {
	t.Parallel()
	h := start(t, withWriteAndAsk)
	alice := h.token("acme", "alice", "developer")
	r := h.held(alice, "2")
	id, callID := approvalID(t, r), r.str("call_id")
	_, qid := h.ask(alice, `{"question":"Deploy now?"}`)

	b := h.browser()
	b.signIn(h.token("globex", "gina", "approver", "answerer", "auditor"))
	p := b.get("/console/approvals")
	if p.status != 200 || strings.Contains(p.body, id) || strings.Contains(p.body, callID) || strings.Contains(p.body, qid) || strings.Contains(p.body, "Deploy now?") {
		t.Fatalf("globex's page shows acme's calls: %d\n%s", p.status, p.body)
	}
	for _, action := range []string{"approve", "deny"} {
		q := b.form("/console/approvals", "/console/approvals/"+id+"/"+action, nil)
		if q.status != http.StatusNotFound || !strings.Contains(q.body, "no such approval") {
			t.Errorf("%s acme's call from globex: %d\n%s", action, q.status, q.body)
		}
		assertConsoleHeaders(t, q)
	}
	if q := b.form("/console/approvals", "/console/questions/"+qid+"/answer", url.Values{"answer": {"yes"}}); q.status != http.StatusNotFound {
		t.Errorf("answer acme's question from globex: %d", q.status)
	}
	bob := h.token("acme", "bob", "approver")
	if a := h.do("GET", "/v1/approvals/"+id, bob, nil); a.str("status") != "pending" {
		t.Fatalf("acme's approval after globex's steps: %s", a.raw)
	}
	if poll := h.do("GET", "/v1/calls/"+callID, alice, nil); poll.str("outcome") != "pending" {
		t.Fatalf("acme's call: %s", poll.raw)
	}
	if h.release() != "1\n" {
		t.Fatal("the held call ran")
	}
}

// withWriteAndAsk offers the default tools and ask-user.
func withWriteAndAsk(s *setup) {
	s.toolsYAML = "tools:\n  builtin: [read-file, write-file, edit-file, glob, grep, ask-user]\n"
}

// A question is listed to whoever may answer it — here an approver with
// the shipped policy's answerer role — and answered through the form; the
// answer is the waiting call's result.
func TestConsoleAnswersAQuestion(t *testing.T) {
	t.Parallel()
	h := start(t, withAskUser)
	alice := h.token("acme", "alice", "developer")
	callID, qid := h.ask(alice, `{"question":"Deploy now?","options":["yes","no"]}`)
	freeCall, freeQID := h.ask(alice, `{"question":"Which branch?"}`)

	// An approver whom policy does not let answer for alice does not see
	// her questions (for them they do not exist, as in the API).
	plain := h.browser()
	plain.signIn(h.token("acme", "bob", "approver"))
	if p := plain.get("/console/approvals"); p.status != 200 || strings.Contains(p.body, qid) || strings.Contains(p.body, "Deploy now?") {
		t.Fatalf("an approver without the answerer role sees the question: %d", p.status)
	}

	b := h.browser()
	b.signIn(h.token("acme", "support", "approver", "answerer"))
	p := b.get("/console/approvals")
	assertConsoleHeaders(t, p)
	qs := p.section(t, "questions")
	for _, el := range []string{`id="answer-` + qid + `"`, `action="/console/questions/` + qid + `/answer"`,
		`type="radio" name="answer" id="answer-` + qid + `-0" value="yes"`, `<label for="answer-` + qid + `-1">no</label>`,
		`id="answer-` + freeQID + `"`, `<label for="answer-text-` + freeQID + `"`, `<textarea id="answer-text-` + freeQID + `" name="answer"`} {
		if !strings.Contains(qs, el) {
			t.Errorf("section#questions lacks %s", el)
		}
	}
	containsAll(t, "the question", item(qs, "question-"+qid), "Deploy now?", "alice", "ask-user", callID, "s-1", `datetime="`)

	// An answer that is not one of the options: 400, nothing recorded.
	bad := b.form("/console/approvals", "/console/questions/"+qid+"/answer", url.Values{"answer": {"maybe"}})
	if bad.status != http.StatusBadRequest || !strings.Contains(bad.body, "one of the question") {
		t.Fatalf("answer outside the options: %d\n%s", bad.status, bad.body)
	}
	assertConsoleHeaders(t, bad)
	if poll := h.do("GET", "/v1/calls/"+callID, alice, nil); poll.str("outcome") != "pending" {
		t.Fatalf("after a refused answer: %s", poll.raw)
	}
	if n := len(h.events("acme", "call_id="+callID+"&phase=question")); n != 0 {
		t.Fatalf("%d answer events after a refused answer", n)
	}
	if empty := b.form("/console/approvals", "/console/questions/"+qid+"/answer", nil); empty.status != http.StatusBadRequest {
		t.Fatalf("no answer: %d", empty.status)
	}

	step := b.noFollow().form("/console/approvals", "/console/questions/"+qid+"/answer", url.Values{"answer": {"yes"}})
	if step.status != http.StatusSeeOther || step.header.Get("Location") != "/console/approvals?done=answered" {
		t.Fatalf("answer: %d Location %q\n%s", step.status, step.header.Get("Location"), step.body)
	}
	poll := h.do("GET", "/v1/calls/"+callID+"?wait=30s", alice, nil)
	if poll.status != 200 || poll.str("outcome") != "ok" || poll.str("content") != "yes" {
		t.Fatalf("the caller's poll after the console's answer: %d %s", poll.status, poll.raw)
	}
	ev := h.events("acme", "call_id="+callID+"&phase=question&outcome=answered")
	if q, _ := ev[0]["question"].(map[string]any); len(ev) != 1 || q["by"] != "support" {
		t.Fatalf("answer event: %v", ev)
	}
	after := b.get("/console/approvals?done=answered")
	containsAll(t, "the page after answering", after.body, "Answer recorded.")
	if strings.Contains(after.section(t, "questions"), `id="answer-`+qid+`"`) {
		t.Fatal("an answered question is still listed")
	}
	if again := b.form("/console/approvals", "/console/questions/"+qid+"/answer", url.Values{"answer": {"no"}}); again.status != http.StatusConflict {
		t.Fatalf("a second answer: %d", again.status)
	}

	// The asker may answer her own question from any console page,
	// without the approver role; a free-text answer keeps its lines.
	own := h.browser()
	own.signIn(alice)
	if p := own.form("/console/", "/console/questions/"+freeQID+"/answer", url.Values{"answer": {"main\r\nthen next"}}); p.status != 200 || !strings.Contains(p.body, "Answer recorded.") {
		t.Fatalf("the asker's answer: %d\n%s", p.status, p.body)
	}
	if poll := h.do("GET", "/v1/calls/"+freeCall+"?wait=30s", alice, nil); poll.str("outcome") != "ok" || poll.str("content") != "main\nthen next" {
		t.Fatalf("the free-text answer: %s", poll.raw)
	}
}

// A step without the session's CSRF token, or marked cross-site by the
// browser, is refused and the call still waits.
func TestConsoleApprovalStepsNeedTheFormsToken(t *testing.T) {
	t.Parallel()
	h := start(t, withWriteAndAsk)
	alice := h.token("acme", "alice", "developer")
	id := approvalID(t, h.held(alice, "2"))
	callID, qid := h.ask(alice, `{"question":"Deploy now?"}`)
	b := h.browser()
	b.signIn(h.token("acme", "support", "approver", "answerer"))
	csrf := b.get("/console/approvals").csrf(t)

	for _, c := range []struct {
		name   string
		path   string
		form   url.Values
		header []string
	}{
		{"approve without a token", "/console/approvals/" + id + "/approve", url.Values{"comment": {"x"}}, nil},
		{"approve with a wrong token", "/console/approvals/" + id + "/approve", url.Values{"csrf": {"AAAA"}}, nil},
		{"approve cross-site", "/console/approvals/" + id + "/approve", url.Values{"csrf": {csrf}}, []string{"Sec-Fetch-Site", "cross-site"}},
		{"approve from another origin", "/console/approvals/" + id + "/approve", url.Values{"csrf": {csrf}}, []string{"Origin", "https://evil.example"}},
		{"deny without a token", "/console/approvals/" + id + "/deny", url.Values{}, nil},
		{"answer without a token", "/console/questions/" + qid + "/answer", url.Values{"answer": {"yes"}}, nil},
	} {
		p := b.post(c.path, c.form, c.header...)
		if p.status != http.StatusForbidden || !strings.Contains(p.body, "Nothing was changed") {
			t.Errorf("%s: %d", c.name, p.status)
		}
		assertConsoleHeaders(t, p)
	}
	if a := h.do("GET", "/v1/approvals/"+id, h.token("acme", "bob", "approver"), nil); a.str("status") != "pending" {
		t.Fatalf("after forged steps: %s", a.raw)
	}
	if poll := h.do("GET", "/v1/calls/"+callID, alice, nil); poll.str("outcome") != "pending" {
		t.Fatalf("the question after forged answers: %s", poll.raw)
	}
	if h.release() != "1\n" {
		t.Fatal("the held call ran")
	}
	if n := len(h.events("acme", "phase=approval")); n != 0 {
		t.Fatalf("%d approval events after forged steps", n)
	}
}

// The asker of an ask-user question — an agent's user, without any
// console role — finds it on the questions page and answers it there;
// someone else of the tenant neither sees it nor can answer it.
func TestConsoleAskerAnswersOnTheQuestionsPage(t *testing.T) {
	t.Parallel()
	h := start(t, withAskUser)
	alice := h.token("acme", "alice", "developer")
	callID, qid := h.ask(alice, `{"question":"Deploy now?","options":["yes","no"]}`)

	other := h.browser()
	home := other.signIn(h.token("acme", "dana", "developer"))
	if !strings.Contains(home.body, `href="/console/questions"`) || strings.Contains(home.body, `href="/console/approvals"`) {
		t.Fatal("a developer's navigation should offer questions, not approvals")
	}
	if p := other.get("/console/questions"); p.status != 200 || strings.Contains(p.body, qid) || !strings.Contains(p.body, `id="questions-empty"`) {
		t.Fatalf("another developer sees alice's question: %d", p.status)
	}
	if p := other.form("/console/questions", "/console/questions/"+qid+"/answer", url.Values{"answer": {"yes"}}); p.status != http.StatusNotFound {
		t.Fatalf("another developer answering: %d", p.status)
	}

	b := h.browser()
	b.signIn(alice)
	p := b.get("/console/questions")
	assertConsoleHeaders(t, p)
	if p.status != 200 || !strings.Contains(p.section(t, "questions"), `id="answer-`+qid+`"`) {
		t.Fatalf("the asker's questions page: %d\n%s", p.status, p.body)
	}
	bad := b.form("/console/questions", "/console/questions/"+qid+"/answer", url.Values{"answer": {"maybe"}})
	if bad.status != http.StatusBadRequest || bad.url.Path != "/console/questions/"+qid+"/answer" || !strings.Contains(bad.body, "Nothing was changed") {
		t.Fatalf("an answer outside the options: %d", bad.status)
	}
	done := b.form("/console/questions", "/console/questions/"+qid+"/answer", url.Values{"answer": {"no"}})
	if done.status != 200 || done.url.Path != "/console/questions" || !strings.Contains(done.body, "Answer recorded.") {
		t.Fatalf("answer: %d at %s", done.status, done.url)
	}
	poll := h.do("GET", "/v1/calls/"+callID+"?wait=30s", alice, nil)
	if poll.status != 200 || poll.str("outcome") != "ok" || poll.str("content") != "no" {
		t.Fatalf("the call after the asker's answer: %d %s", poll.status, poll.raw)
	}
}
