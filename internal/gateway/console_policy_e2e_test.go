package gateway

import (
	"html"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// byID is the text of the element with id on a console page ("" and
// false when there is none).
func byID(body, id string) (string, bool) {
	m := regexp.MustCompile(`id="` + regexp.QuoteMeta(id) + `"[^>]*>([^<]*)<`).FindStringSubmatch(body)
	if m == nil {
		return "", false
	}
	return html.UnescapeString(strings.TrimSpace(m[1])), true
}

func wantByID(t *testing.T, p page, id, want string) {
	t.Helper()
	got, ok := byID(p.body, id)
	if !ok || got != want {
		t.Errorf("%s: #%s = %q (present %v), want %q", p.url.Path, id, got, ok, want)
	}
}

// evalForm is a playground submission of a would-be call.
func evalCall(tool, principal, roles, args, explain string) url.Values {
	return url.Values{"mode": {"call"}, "tool": {tool}, "principal": {principal}, "roles": {roles},
		"arguments": {args}, "document": {""}, "explain": {explain}}
}

func TestConsolePolicyPageShowsTheServingRevisionAndModules(t *testing.T) {
	t.Parallel()
	h := start(t)
	admin := h.token("acme", "pat", "policy-admin")
	info := h.do("GET", "/v1/policy", admin, nil)
	rev := info.str("revision")
	if info.status != 200 || rev == "" {
		t.Fatalf("GET /v1/policy: %d %s", info.status, info.raw)
	}
	b := h.browser()
	b.signIn(admin)
	p := b.get("/console/policy")
	if p.status != 200 {
		t.Fatalf("policy page: %d\n%s", p.status, p.body)
	}
	assertConsoleHeaders(t, p)
	wantByID(t, p, "policy-revision", rev)
	for _, m := range info.body["modules"].([]any) {
		path := m.(map[string]any)["path"].(string)
		if !strings.Contains(p.body, "<code>"+html.EscapeString(path)+"</code>") {
			t.Errorf("module %s is not listed", path)
		}
	}
	for _, want := range []string{"authz.rego", "availability.rego", `aria-current="page"`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("policy page lacks %s", want)
		}
	}
	if strings.Contains(p.body, `id="reload-error"`) {
		t.Error("a reload error is shown though every reload succeeded")
	}
	// The forms the browser suite drives: every field named and labelled.
	for _, want := range []string{`<form id="playground" method="post" action="/console/policy/eval`, `<form id="replay" method="post" action="/console/policy/replay`,
		`name="mode" value="call"`, `name="mode" value="document"`, `name="tool"`, `name="principal"`, `name="roles"`,
		`name="arguments"`, `name="document"`, `<select id="eval-explain" name="explain">`, `name="candidate" value="shadow"`,
		`name="module_name"`, `name="module_source"`, `name="from"`, `name="to"`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("policy page lacks %s", want)
		}
	}
	for _, id := range regexp.MustCompile(`<(?:input|textarea|select)\b[^>]*\bid="([^"]+)"`).FindAllStringSubmatch(p.body, -1) {
		if !strings.Contains(p.body, `<label for="`+id[1]+`"`) {
			t.Errorf("field #%s has no label", id[1])
		}
	}
	// No shadow policy: none configured, nothing counted.
	wantByID(t, p, "shadow-compared", "0")
	if !strings.Contains(p.body, "No shadow policy is configured") {
		t.Error("the page does not say that no shadow policy is configured")
	}

	// A change that does not compile: the page shows the reload error
	// beside the revision that keeps serving.
	must(t, os.WriteFile(filepath.Join(h.dir, "policies", "broken.rego"), []byte("package toolgate.authz\n\nbroken if {\n"), 0o644))
	deadline := time.Now().Add(30 * time.Second)
	for {
		p = b.get("/console/policy")
		if strings.Contains(p.body, `id="reload-error"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no reload error shown after a broken change:\n%s", p.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	reloadErr := regexp.MustCompile(`(?s)id="reload-error">.*?<pre>(.*?)</pre>`).FindStringSubmatch(p.body)
	if p.status != 200 || reloadErr == nil || !strings.Contains(reloadErr[1], "broken.rego:") {
		t.Fatalf("reload error without the file: %d\n%s", p.status, p.body)
	}
	wantByID(t, p, "policy-revision", rev)
}

// The playground evaluates would-be calls and raw documents with the
// serving revision, shows the decision, its reasons and the explanation,
// and changes nothing: no tool runs and no audit event is written.
func TestConsolePolicyPlaygroundEvaluatesWithoutEffect(t *testing.T) {
	t.Parallel()
	h := start(t)
	before := h.snapshot()
	n := h.verify("acme")
	b := h.browser()
	b.signIn(h.token("acme", "pat", "policy-admin"))

	// A would-be write to a protected path: denied, with the reason.
	p := b.form("/console/policy", "/console/policy/eval",
		evalCall("write-file", "alice", "developer", `{"path":"secrets/x","content":"y"}`, "full"))
	if p.status != 200 || !strings.Contains(p.body, `<section id="eval-result" data-result="denied"`) {
		t.Fatalf("denied would-be call: %d\n%s", p.status, p.body)
	}
	assertConsoleHeaders(t, p)
	if !strings.Contains(p.body, "access to secrets/x is not allowed: the path is protected") {
		t.Error("the denial's reason is not shown")
	}
	if expl, ok := byID(p.body, "explanation"); !ok || !strings.Contains(expl, "Enter data.toolgate.authz.decision") {
		t.Errorf("explain=full shows no trace of the decision: %q", expl)
	}
	// The form keeps what was evaluated.
	if !strings.Contains(p.body, `name="tool" value="write-file"`) || !strings.Contains(p.body, `<option value="full" selected>`) {
		t.Error("the playground form lost its input")
	}

	// A would-be read: allowed, with the grant as reason.
	p = b.form("/console/policy", "/console/policy/eval", evalCall("read-file", "alice", "developer", `{"path":"docs/guide.md"}`, ""))
	if p.status != 200 || !strings.Contains(p.body, `data-result="allow"`) || !strings.Contains(p.body, "allowed: developer may read") {
		t.Fatalf("allowed would-be call: %d\n%s", p.status, p.body)
	}
	if strings.Contains(p.body, `id="explanation"`) {
		t.Error("an explanation is shown though none was asked for")
	}
	// Roles come from the form: a viewer is not offered write-file.
	p = b.form("/console/policy", "/console/policy/eval", evalCall("write-file", "vera", "viewer", `{"path":"docs/a","content":"x"}`, ""))
	if p.status != 200 || !strings.Contains(p.body, `data-result="unavailable"`) {
		t.Fatalf("a viewer's would-be write: %d\n%s", p.status, p.body)
	}

	// A raw request document.
	doc := `{"principal":{"id":"alice","roles":["developer"],"groups":[],"claims":{}},"tool":{"name":"read-file"},"resources":[{"type":"file","path":"secrets/db.env","access":"read"}],"args":{}}`
	p = b.form("/console/policy", "/console/policy/eval", url.Values{"mode": {"document"}, "document": {doc}, "explain": {"fails"}})
	if p.status != 200 || !strings.Contains(p.body, `data-result="denied"`) || !strings.Contains(p.body, "access to secrets/db.env is not allowed") {
		t.Fatalf("raw document: %d\n%s", p.status, p.body)
	}

	// Mistakes: 400 with the precise message, the input kept, nothing
	// evaluated.
	for _, c := range []struct {
		name string
		form url.Values
		msg  string
		kept string
	}{
		{"arguments that are not JSON", evalCall("read-file", "alice", "developer", `{"path": "docs/guide.md",}`, ""),
			"the arguments are not valid JSON: invalid character", `{"path": "docs/guide.md",}`},
		{"a document that is not JSON", url.Values{"mode": {"document"}, "document": {`{"tool": {"name": "read-file"}`}},
			"the request document is not valid JSON", `{"tool": {"name": "read-file"}`},
		{"a document that is not an object", url.Values{"mode": {"document"}, "document": {`["read-file"]`}},
			"the request document must be a JSON object", `["read-file"]`},
		{"another tenant's document", url.Values{"mode": {"document"}, "document": {`{"tenant":"globex","tool":{"name":"read-file"}}`}},
			"the request document must be a JSON object of your own tenant", `{"tenant":"globex","tool":{"name":"read-file"}}`},
		{"an unknown explain level", evalCall("read-file", "alice", "developer", `{}`, "all"), "explain must be notes, fails or full", `value="alice"`},
		{"no principal", evalCall("read-file", "", "", `{}`, ""), "a would-be call needs a tool and a principal id", `value="read-file"`},
		{"a bad session id", func() url.Values {
			v := evalCall("read-file", "alice", "developer", `{}`, "")
			v.Set("session_id", "has spaces")
			return v
		}(), "session_id must be 1-128 characters of letters, digits and ._:@-", `value="has spaces"`},
	} {
		p := b.form("/console/policy", "/console/policy/eval", c.form)
		if p.status != http.StatusBadRequest {
			t.Errorf("%s: %d", c.name, p.status)
			continue
		}
		assertConsoleHeaders(t, p)
		if prob, _ := byID(p.body, "eval-problem"); !strings.Contains(prob, c.msg) {
			t.Errorf("%s: problem %q, want %q", c.name, prob, c.msg)
		}
		kept := c.kept
		if !strings.HasPrefix(kept, "value=") {
			kept = html.EscapeString(kept)
		}
		if !strings.Contains(p.body, kept) {
			t.Errorf("%s: the form lost the input %s", c.name, kept)
		}
		if strings.Contains(p.body, `id="eval-result"`) {
			t.Errorf("%s: a result is shown", c.name)
		}
	}

	h.assertUnchanged(before)
	if got := h.verify("acme"); got != n {
		t.Fatalf("evaluations wrote %d audit events", got-n)
	}
}

// denyAll is a candidate pack that compiles and denies every call.
var denyAll = url.Values{
	"candidate":     {"modules"},
	"module_name":   {"availability.rego", "authz.rego", ""},
	"module_source": {"package toolgate.availability\n\nallow := true\n", "package toolgate.authz\n\ndecision := {\"allow\": false, \"reasons\": [\"the candidate denies everything\"]}\n", ""},
}

// Replay lists the decisions a candidate changes, each linking to its
// audit event; a candidate that does not compile is refused with its
// file:line problems and the form keeps it.
func TestConsolePolicyReplayListsTheChangedDecisions(t *testing.T) {
	t.Parallel()
	h := start(t)
	alice := h.token("acme", "alice", "developer")
	var allowed []string
	for _, c := range []struct{ tool, args, outcome string }{
		{"read-file", `{"path":"docs/guide.md"}`, "ok"},
		{"write-file", `{"path":"notes/a.txt","content":"x"}`, "ok"},
		{"read-file", `{"path":"src/app.py"}`, "ok"},
		{"read-file", `{"path":"secrets/db.env"}`, "denied"},
	} {
		r := h.call(alice, c.tool, `{"arguments":`+c.args+`}`)
		if r.str("outcome") != c.outcome {
			t.Fatalf("%s %s: %s", c.tool, c.args, r.raw)
		}
		evs := h.events("acme", "phase=decision&call_id="+r.str("call_id"))
		if len(evs) != 1 {
			t.Fatalf("decision events of %s: %v", r.str("call_id"), evs)
		}
		if c.outcome == "ok" {
			allowed = append(allowed, evs[0]["id"].(string))
		}
	}
	// Another tenant's allowed call is not replayed.
	if r := h.call(h.token("globex", "gina", "developer"), "read-file", `{"arguments":{"path":"docs/guide.md"}}`); r.status != 200 {
		t.Fatalf("globex call: %d %s", r.status, r.raw)
	}
	h.sync("acme")
	h.sync("globex")
	before := h.verify("acme")

	b := h.browser()
	b.signIn(h.token("acme", "pat", "policy-admin", "auditor"))
	p := b.form("/console/policy", "/console/policy/replay", cloneValues(denyAll))
	if p.status != 200 || !strings.Contains(p.body, `<section id="replay-result"`) {
		t.Fatalf("replay: %d\n%s", p.status, p.body)
	}
	assertConsoleHeaders(t, p)
	wantByID(t, p, "replay-events", "4")
	wantByID(t, p, "replay-changed-count", "3")
	wantByID(t, p, "replay-unchanged", "1")
	if !strings.Contains(p.body, `<tr id="direction-allow_to_deny">`) || strings.Contains(p.body, `id="direction-deny_to_allow"`) {
		t.Error("the directions table is not allow → deny only")
	}
	rows := regexp.MustCompile(`(?s)<table class="responsive" id="changed">.*?</table>`).FindString(p.body)
	if got := strings.Count(rows, "<tr data-event="); got != 3 {
		t.Fatalf("table#changed lists %d decisions, want 3:\n%s", got, rows)
	}
	for _, id := range allowed {
		if !strings.Contains(rows, `<tr data-event="`+id+`">`) || !strings.Contains(rows, `href="/console/audit/`+id+`"`) {
			t.Errorf("allowed decision %s is not listed with a link to its event", id)
		}
	}
	if strings.Count(rows, `<span class="change-from">allow</span> → <span class="change-to">deny</span>`) != 3 ||
		!strings.Contains(rows, "<code>write-file</code>") || !strings.Contains(rows, "alice") {
		t.Errorf("changed decisions lack tool, principal or direction:\n%s", rows)
	}
	// The candidate stays in the form for the next attempt.
	if !strings.Contains(p.body, `value="authz.rego"`) || !strings.Contains(p.body, html.EscapeString("the candidate denies everything")) {
		t.Error("the replay form lost the candidate")
	}

	// A candidate that does not compile: 400 with its file:line problem.
	bad := cloneValues(denyAll)
	bad["module_source"] = []string{"package toolgate.availability\n\nallow := true\n", "package toolgate.authz\n\ndecision := {\"allow\": nope}\n", ""}
	p = b.form("/console/policy", "/console/policy/replay", bad)
	if p.status != http.StatusBadRequest {
		t.Fatalf("candidate that does not compile: %d\n%s", p.status, p.body)
	}
	assertConsoleHeaders(t, p)
	prob := regexp.MustCompile(`(?s)id="replay-problem"><pre>(.*?)</pre>`).FindStringSubmatch(p.body)
	if prob == nil || !strings.Contains(prob[1], "candidate policy rejected") || !strings.Contains(prob[1], "authz.rego:3") {
		t.Fatalf("compile problem not shown with file:line:\n%s", p.body)
	}
	if strings.Contains(p.body, `id="replay-result"`) || !strings.Contains(p.body, html.EscapeString(`decision := {"allow": nope}`)) {
		t.Error("a refused candidate shows a result or lost its source")
	}

	// More mistakes, each 400 with its message.
	for _, c := range []struct {
		name string
		form url.Values
		msg  string
	}{
		{"the shadow without one configured", url.Values{"candidate": {"shadow"}}, "no shadow policy is configured (policy.shadow)"},
		{"no module", url.Values{"candidate": {"modules"}, "module_name": {""}, "module_source": {""}}, "paste at least one module"},
		{"a module without a name", url.Values{"candidate": {"modules"}, "module_name": {""}, "module_source": {"package x"}}, "module 1 needs a file name"},
		{"a path as module name", url.Values{"candidate": {"modules"}, "module_name": {"../a.rego"}, "module_source": {"package x"}}, "module names must be plain file names ending in .rego"},
		{"a bad time", func() url.Values { v := cloneValues(denyAll); v.Set("from", "last week"); return v }(), "from must be an RFC 3339 time"},
		{"data that is not an object", func() url.Values { v := cloneValues(denyAll); v.Set("data", "[1]"); return v }(), "data must be a JSON object"},
	} {
		p := b.form("/console/policy", "/console/policy/replay", c.form)
		if p.status != http.StatusBadRequest || !strings.Contains(p.body, html.EscapeString(c.msg)) {
			t.Errorf("%s: %d, want 400 with %q", c.name, p.status, c.msg)
		}
	}
	if got := h.verify("acme"); got != before {
		t.Fatalf("replays wrote %d audit events", got-before)
	}
}

// With a shadow policy configured, the page counts its divergences from
// the audit log and replays it as a candidate.
func TestConsolePolicyShadowDivergenceAndReplay(t *testing.T) {
	t.Parallel()
	shadowDir := filepath.Join(t.TempDir(), "shadow")
	writeShadowPolicy(t, shadowDir) // denies read-file, allows everything else
	h := start(t, func(s *setup) { s.policyYAML = "  shadow: " + shadowDir + "\n" })
	alice := h.token("acme", "alice", "developer")
	for _, c := range []struct{ tool, args string }{
		{"read-file", `{"path":"docs/guide.md"}`},                  // allow, shadow denies
		{"read-file", `{"path":"secrets/db.env"}`},                 // both deny
		{"write-file", `{"path":"notes/a.txt","content":"x"}`},     // both allow
		{"write-file", `{"path":"secrets/x","content":"x"}`},       // deny, shadow allows
		{"write-file", `{"path":"src/b.txt","content":"x"}`},       // both allow
		{"write-file", `{"path":"nowhere","content":"x"}`},         // deny, shadow allows
		{"read-file", `{"path":"../escape"}`},                      // invalid: no shadow verdict
		{"write-file", `{"path":"notes/c.txt","content":"x"}`},     // both allow
		{"write-file", `{"path":"release/VERSION","content":"2"}`}, // held, shadow allows: agree
	} {
		if r := h.call(alice, c.tool, `{"arguments":`+c.args+`}`); r.status != 200 {
			t.Fatalf("%s %s: %d %s", c.tool, c.args, r.status, r.raw)
		}
	}
	h.sync("acme")
	b := h.browser()
	b.signIn(h.token("acme", "pat", "policy-admin"))
	p := b.get("/console/policy")
	if p.status != 200 {
		t.Fatalf("policy page: %d", p.status)
	}
	assertConsoleHeaders(t, p)
	wantByID(t, p, "shadow-compared", "8")
	wantByID(t, p, "shadow-agree", "5")
	wantByID(t, p, "shadow-allow_to_deny", "1")
	wantByID(t, p, "shadow-deny_to_allow", "2")
	wantByID(t, p, "shadow-errors", "0")
	if !strings.Contains(p.body, "<code>shadow-1</code>") {
		t.Error("the shadow revision is not named")
	}

	p = b.form("/console/policy", "/console/policy/replay", url.Values{"candidate": {"shadow"}})
	if p.status != 200 {
		t.Fatalf("shadow replay: %d\n%s", p.status, p.body)
	}
	// Replay compares allow, deny and approval: the held write becomes
	// an allow too.
	wantByID(t, p, "replay-changed-count", "4")
	rows := regexp.MustCompile(`(?s)<table class="responsive" id="changed">.*?</table>`).FindString(p.body)
	if strings.Count(rows, "<tr data-event=") != 4 || strings.Contains(rows, `href="/console/audit/`) {
		t.Errorf("shadow replay rows (no audit links without the auditor role):\n%s", rows)
	}
}

// Only policy-admin uses the policy page; others get 403 on every route.
func TestConsolePolicyNeedsThePolicyAdminRole(t *testing.T) {
	t.Parallel()
	h := start(t)
	for _, roles := range [][]string{{"developer"}, {"auditor", "approver"}} {
		b := h.browser()
		home := b.signIn(h.token("acme", "dana", roles...))
		if strings.Contains(home.body, `href="/console/policy"`) {
			t.Errorf("%v: the overview links the policy page", roles)
		}
		p := b.get("/console/policy")
		if p.status != http.StatusForbidden {
			t.Errorf("%v: GET /console/policy: %d", roles, p.status)
		}
		assertConsoleHeaders(t, p)
		for _, action := range []string{"/console/policy/eval", "/console/policy/replay"} {
			form := evalCall("read-file", "alice", "developer", `{}`, "")
			if action == "/console/policy/replay" {
				form = cloneValues(denyAll)
			}
			p := b.form("/console/", action, form)
			if p.status != http.StatusForbidden || strings.Contains(p.body, `id="eval-result"`) || strings.Contains(p.body, `id="replay-result"`) {
				t.Errorf("%v: POST %s: %d", roles, action, p.status)
			}
			assertConsoleHeaders(t, p)
		}
	}
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}
