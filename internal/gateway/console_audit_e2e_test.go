package gateway

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/audit"
)

// The console's audit pages, driven as an auditor's browser would: the
// search with every filter and keyset paging, an event with its masked
// document and the proof that it is in the log, the verify button, and
// the export download — each scoped to the auditor's tenant.

// auditScene makes calls of every kind in acme (and one in globex) and
// returns the gateway with their call ids by name.
func auditScene(t *testing.T) (*harness, map[string]string) {
	t.Helper()
	h := start(t, withFastCheckpoints)
	alice := h.token("acme", "alice", "developer")
	bob := h.token("acme", "bob", "developer")
	calls := map[string]string{}
	for _, c := range []struct {
		name, token, tool, body, outcome string
	}{
		{"write", alice, "write-file", `{"arguments":{"path":"notes/a.txt","content":"console-hidden-words"},"session_id":"s-alice"}`, "ok"},
		{"denied", alice, "read-file", `{"arguments":{"path":"secrets/db.env"},"session_id":"s-alice"}`, "denied"},
		{"invalid", bob, "read-file", `{"arguments":{"path":7},"session_id":"s-bob"}`, "invalid_arguments"},
		{"read", bob, "read-file", `{"arguments":{"path":"docs/guide.md"}}`, "ok"},
		{"globex", h.token("globex", "gina", "developer"), "read-file", `{"arguments":{"path":"docs/guide.md"}}`, "ok"},
	} {
		r := h.call(c.token, c.tool, c.body)
		if r.str("outcome") != c.outcome || r.str("call_id") == "" {
			t.Fatalf("%s: %d %s, want outcome %s", c.name, r.status, r.raw, c.outcome)
		}
		calls[c.name] = r.str("call_id")
	}
	h.sync("acme")
	h.sync("globex")
	return h, calls
}

var (
	eventRow  = regexp.MustCompile(`<tr id="event-([^"]+)">`)
	olderLink = regexp.MustCompile(`<a id="older" href="([^"]+)"`)
)

// rowIDs are the event ids of the page's results table, in order.
func rowIDs(p page) []string {
	var out []string
	for _, m := range eventRow.FindAllStringSubmatch(p.body, -1) {
		out = append(out, html.UnescapeString(m[1]))
	}
	return out
}

// idsWhere are the ids of events (newest first) that keep selects.
func idsWhere(evs []map[string]any, keep func(map[string]any) bool) []string {
	var out []string
	for _, e := range evs {
		if keep(e) {
			out = append(out, e["id"].(string))
		}
	}
	return out
}

func eventTime(t *testing.T, e map[string]any) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339Nano, e["time"].(string))
	if err != nil {
		t.Fatalf("event time %v: %v", e["time"], err)
	}
	return tm
}

// searchAll pages through the console's search from path, following
// "Older events", and returns every event id shown, in order.
func (b *browser) searchAll(t *testing.T, path string) []string {
	t.Helper()
	var ids []string
	for pages := 0; ; pages++ {
		if pages > 100 {
			t.Fatalf("more than 100 pages from %s", path)
		}
		p := b.get(path)
		if p.status != 200 {
			t.Fatalf("%s: %d\n%s", path, p.status, p.body)
		}
		assertConsoleHeaders(t, p)
		if pages > 0 && !strings.Contains(p.body, `id="newest"`) {
			t.Errorf("%s: a later page has no link back to the newest events", path)
		}
		ids = append(ids, rowIDs(p)...)
		m := olderLink.FindStringSubmatch(p.body)
		if m == nil {
			return ids
		}
		path = html.UnescapeString(m[1])
	}
}

func TestConsoleAuditSearchFiltersAndPages(t *testing.T) {
	t.Parallel()
	h, calls := auditScene(t)
	all := h.allEvents("acme", "") // newest first, from the API
	if len(all) != 6 {             // two per call that ran, one per refused call
		t.Fatalf("only %d acme events", len(all))
	}
	b := h.browser()
	b.signIn(h.token("acme", "erin", "auditor"))

	p := b.get("/console/audit")
	if p.status != 200 {
		t.Fatalf("audit page: %d\n%s", p.status, p.body)
	}
	assertConsoleHeaders(t, p)
	for _, want := range []string{`<form id="audit-search"`, `<table id="events"`, `<form id="verify" method="post"`, `<a id="export"`,
		`<label for="f-from">From (UTC`, `<label for="f-to">To (UTC`, `name="session_id"`, `name="call_id"`} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the audit page lacks %s", want)
		}
	}
	// Every acme event, newest first, exactly as the API lists them; no
	// globex event.
	if got, want := rowIDs(p), eventIDs(all); !slices.Equal(got, want) {
		t.Fatalf("the audit page lists %v,\nthe API %v", got, want)
	}
	for _, e := range h.allEvents("globex", "") {
		if strings.Contains(p.body, e["id"].(string)) {
			t.Fatalf("globex event %v on acme's audit page", e["id"])
		}
	}

	// Each filter narrows to exactly the events it names.
	mid := eventTime(t, all[len(all)/2])
	newest := eventTime(t, all[1])
	at := func(tm time.Time) string { return tm.UTC().Format("2006-01-02T15:04:05.000") }
	hourAround := "from=" + mid.Add(-time.Hour).UTC().Format("2006-01-02T15:04") + "&to=" + mid.Add(time.Hour).UTC().Format("2006-01-02T15:04")
	for _, c := range []struct {
		query string
		keep  func(map[string]any) bool
	}{
		{"tool=write-file", func(e map[string]any) bool { return e["tool"] == "write-file" }},
		{"principal=bob", func(e map[string]any) bool { return e["principal"] == "bob" }},
		{"outcome=denied", func(e map[string]any) bool { return e["outcome"] == "denied" }},
		{"outcome=invalid_arguments", func(e map[string]any) bool { return e["outcome"] == "invalid_arguments" }},
		{"phase=result", func(e map[string]any) bool { return e["phase"] == "result" }},
		{"session_id=s-alice", func(e map[string]any) bool { return e["session_id"] == "s-alice" }},
		{"call_id=" + calls["write"], func(e map[string]any) bool { return e["call_id"] == calls["write"] }},
		{"principal=alice&phase=decision", func(e map[string]any) bool { return e["principal"] == "alice" && e["phase"] == "decision" }},
		{"from=" + at(mid), func(e map[string]any) bool { return !eventTime(t, e).Before(mid) }},
		{"to=" + at(mid), func(e map[string]any) bool { return !eventTime(t, e).After(mid) }},
		{"from=" + at(mid) + "&to=" + at(newest), func(e map[string]any) bool {
			return !eventTime(t, e).Before(mid) && !eventTime(t, e).After(newest)
		}},
		// A window as the form's datetime-local inputs send it, to the
		// minute, around every event.
		{hourAround, func(map[string]any) bool { return true }},
		// The form sends every field, the empty ones too.
		{"tool=&principal=&outcome=&phase=result&session_id=&call_id=&from=&to=&limit=", func(e map[string]any) bool { return e["phase"] == "result" }},
	} {
		want := idsWhere(all, c.keep)
		if len(want) == 0 || (len(want) == len(all)) != (c.query == hourAround) {
			t.Fatalf("%s: the scene does not test this filter (%d of %d events)", c.query, len(want), len(all))
		}
		p := b.get("/console/audit?" + c.query)
		if p.status != 200 {
			t.Fatalf("%s: %d\n%s", c.query, p.status, p.body)
		}
		if got := rowIDs(p); !slices.Equal(got, want) {
			t.Errorf("%s: listed %v, want %v", c.query, got, want)
		}
	}
	// The form shows the filters back.
	p = b.get("/console/audit?outcome=denied&principal=alice")
	if !strings.Contains(p.body, `<option value="denied" selected>`) || !strings.Contains(p.body, `name="principal" value="alice"`) {
		t.Errorf("the form does not show the filters back:\n%s", p.body)
	}

	// Keyset paging with a small page yields every event exactly once,
	// newest first; the paging links carry the filters.
	if got := b.searchAll(t, "/console/audit?limit=2"); !slices.Equal(got, eventIDs(all)) {
		t.Fatalf("paging by 2 yielded %v,\nwant %v", got, eventIDs(all))
	}
	alices := idsWhere(all, func(e map[string]any) bool { return e["principal"] == "alice" })
	if got := b.searchAll(t, "/console/audit?principal=alice&limit=1"); !slices.Equal(got, alices) {
		t.Fatalf("paging alice's events by 1 yielded %v, want %v", got, alices)
	}
	// A cursor edited or replayed with other filters is refused on the
	// search page.
	first := b.get("/console/audit?limit=2")
	m := olderLink.FindStringSubmatch(first.body)
	if m == nil {
		t.Fatal("no older link with limit=2")
	}
	older, _ := url.Parse(html.UnescapeString(m[1]))
	q := older.Query()
	q.Set("principal", "bob")
	if p := b.get("/console/audit?" + q.Encode()); p.status != 400 || !strings.Contains(p.body, "The search could not run") || strings.Contains(p.body, `id="events"`) {
		t.Errorf("a cursor of other filters: %d\n%s", p.status, p.body)
	}

	// Bad input: the form again with a precise problem, status 400, and
	// no query run.
	for _, c := range []struct{ query, problem string }{
		{"from=2025-06-02T10:00&to=2025-06-01T10:00", "From (2025-06-02 10:00:00Z) is after To (2025-06-01 10:00:00Z)"},
		{"from=yesterday", "From is not a date and time"},
		{"to=2025-13-01T10:00", "To is not a date and time"},
		{"limit=0", "Limit must be a whole number from 1 to 1000."},
		{"limit=1001", "Limit must be a whole number from 1 to 1000."},
		{"limit=ten", "Limit must be a whole number from 1 to 1000."},
	} {
		p := b.get("/console/audit?" + c.query)
		if p.status != http.StatusBadRequest || !strings.Contains(html.UnescapeString(p.body), c.problem) {
			t.Errorf("%s: %d, want 400 with %q:\n%s", c.query, p.status, c.problem, p.body)
		}
		if strings.Contains(p.body, `id="events"`) || strings.Contains(p.body, `id="no-events"`) {
			t.Errorf("%s: a query ran despite the problem", c.query)
		}
		if !strings.Contains(p.body, `<form id="audit-search"`) {
			t.Errorf("%s: no search form to correct the input", c.query)
		}
		assertConsoleHeaders(t, p)
	}
	// A filter that matches nothing says so.
	if p := b.get("/console/audit?tool=no-such-tool"); p.status != 200 || !strings.Contains(p.body, `id="no-events"`) || len(rowIDs(p)) != 0 {
		t.Errorf("a search without matches: %d\n%s", p.status, p.body)
	}
}

func TestConsoleAuditEventShowsDocumentDecisionAndProof(t *testing.T) {
	t.Parallel()
	h, calls := auditScene(t)
	all := h.allEvents("acme", "")
	byCall := func(call, phase string) map[string]any {
		for _, e := range all {
			if e["call_id"] == call && e["phase"] == phase {
				return e
			}
		}
		t.Fatalf("no %s event of call %s", phase, call)
		return nil
	}
	b := h.browser()
	b.signIn(h.token("acme", "erin", "auditor"))

	// The write's decision event: the masked document, the decision, the
	// digest and hash, and — once a checkpoint covers it — the proof.
	write := byCall(calls["write"], "decision")
	path := "/console/audit/" + write["id"].(string)
	var p page
	deadline := time.Now().Add(30 * time.Second)
	for {
		p = b.get(path)
		if p.status != 200 {
			t.Fatalf("%s: %d\n%s", path, p.status, p.body)
		}
		if strings.Contains(p.body, `data-status="verified"`) || time.Now().After(deadline) {
			break
		}
		if !strings.Contains(p.body, `data-status="pending"`) {
			t.Fatalf("proof neither verified nor pending:\n%s", p.body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	assertConsoleHeaders(t, p)
	text := html.UnescapeString(p.body)
	if !strings.Contains(p.body, `<section id="proof" class="item" data-status="verified"`) {
		t.Fatalf("the proof is not verified within 30s:\n%s", p.body)
	}
	cp := regexp.MustCompile(`verified against checkpoint (\d+)`).FindStringSubmatch(text)
	if cp == nil {
		t.Fatalf("no checkpoint named:\n%s", p.body)
	}
	var size int64
	fmt.Sscan(cp[1], &size)
	if idx := int64(write["log_index"].(float64)); size <= idx {
		t.Fatalf("verified against checkpoint %d, but the event is at log index %d", size, idx)
	}
	if strings.Contains(p.body, "console-hidden-words") || !strings.Contains(text, `"content": "**masked**"`) {
		t.Fatalf("the request document is not shown masked:\n%s", p.body)
	}
	input := write["input"].(map[string]any)
	if !strings.Contains(text, `"path": "notes/a.txt"`) || input["args"].(map[string]any)["content"] != "**masked**" {
		t.Fatalf("the request document lacks its unmasked parts:\n%s", p.body)
	}
	for _, want := range []string{write["request_digest"].(string), write["hash"].(string), write["policy_revision"].(string),
		write["decision_id"].(string), `<pre id="decision">`, `id="durations"`} {
		if want == "" || !strings.Contains(text, want) {
			t.Errorf("the event page lacks %q", want)
		}
	}
	for k := range write["decision"].(map[string]any) {
		if !strings.Contains(text, `"`+k+`":`) {
			t.Errorf("the decision lacks its member %q", k)
		}
	}
	// The other events of the call (its result), and links to filter by
	// call, session and principal.
	result := byCall(calls["write"], "result")
	if !strings.Contains(p.body, `<tr id="call-event-`+result["id"].(string)+`">`) || !strings.Contains(p.body, `href="/console/audit/`+result["id"].(string)+`"`) {
		t.Errorf("the page does not link the call's result event %v:\n%s", result["id"], p.body)
	}
	for _, link := range []string{`href="/console/audit?call_id=` + calls["write"] + `"`, `href="/console/audit?session_id=s-alice"`, `href="/console/audit?principal=alice"`} {
		if !strings.Contains(p.body, link) {
			t.Errorf("the event page lacks the link %s", link)
		}
	}

	// The denied call's decision: its reasons.
	denied := byCall(calls["denied"], "decision")
	p = b.get("/console/audit/" + denied["id"].(string))
	text = html.UnescapeString(p.body)
	reasons, _ := denied["reasons"].([]any)
	if p.status != 200 || len(reasons) == 0 {
		t.Fatalf("denied event: %d, reasons %v", p.status, reasons)
	}
	for _, r := range reasons {
		if !strings.Contains(text, "<li>"+r.(string)+"</li>") {
			t.Errorf("the denied event's page lacks the reason %q", r)
		}
	}
	if !strings.Contains(p.body, `class="outcome outcome-denied"`) {
		t.Error("the denied event's outcome is not shown as denied")
	}
	// An invalid call has no decision: the page says so.
	invalid := byCall(calls["invalid"], "decision")
	if p := b.get("/console/audit/" + invalid["id"].(string)); p.status != 200 || !strings.Contains(p.body, `<p id="decision" class="muted">`) {
		t.Errorf("invalid call's event: %d\n%s", p.status, p.body)
	}

	// Another tenant's event, and one that does not exist: 404.
	for _, e := range h.allEvents("globex", "") {
		p := b.get("/console/audit/" + e["id"].(string))
		if p.status != http.StatusNotFound || strings.Contains(p.body, e["id"].(string)+"</") {
			t.Errorf("globex event %v as an acme auditor: %d", e["id"], p.status)
		}
		assertConsoleHeaders(t, p)
	}
	if p := b.get("/console/audit/0190a0a0-0000-7000-8000-000000000000"); p.status != http.StatusNotFound {
		t.Errorf("an unknown event: %d", p.status)
	}
}

func TestConsoleAuditVerifyAndExport(t *testing.T) {
	t.Parallel()
	h, _ := auditScene(t)
	all := h.allEvents("acme", "")
	b := h.browser()
	b.signIn(h.token("acme", "erin", "auditor"))

	// The verify button: a CSRF-protected POST that shows the result on
	// the search page, filters kept.
	p := b.form("/console/audit?principal=bob", "/console/audit/verify?principal=bob", nil)
	if p.status != 200 || !strings.Contains(p.body, `<section id="verify-result" data-ok="true"`) ||
		!strings.Contains(p.body, fmt.Sprintf("The log verifies: %d stored events checked", len(all))) {
		t.Fatalf("verify: %d\n%s", p.status, p.body)
	}
	assertConsoleHeaders(t, p)
	if got, want := rowIDs(p), idsWhere(all, func(e map[string]any) bool { return e["principal"] == "bob" }); !slices.Equal(got, want) {
		t.Errorf("after verify the page lists %v, want bob's events %v", got, want)
	}
	if p := b.post("/console/audit/verify", url.Values{}); p.status != http.StatusForbidden || strings.Contains(p.body, "verify-result") {
		t.Errorf("verify without the CSRF token: %d", p.status)
	}

	// The export link is the log of the search's time window.
	p = b.get("/console/audit")
	m := regexp.MustCompile(`<a id="export" class="button" href="([^"]+)"`).FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no export link:\n%s", p.body)
	}
	download := func(path string) (page, [][]byte) {
		t.Helper()
		d := b.get(path)
		if d.status != 200 {
			t.Fatalf("%s: %d\n%s", path, d.status, d.body)
		}
		if ct := d.header.Get("Content-Type"); ct != "application/x-ndjson" {
			t.Fatalf("%s: Content-Type %q", path, ct)
		}
		if cd := d.header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment;") || !strings.Contains(cd, `filename=toolgate-audit-acme`) {
			t.Fatalf("%s: Content-Disposition %q", path, cd)
		}
		return d, bytes.Split(bytes.TrimSuffix([]byte(d.body), []byte("\n")), []byte("\n"))
	}
	d, lines := download(html.UnescapeString(m[1]))
	if got, want := lineIDs(t, lines, "id"), eventIDs(reversed(all)); !slices.Equal(got, want) {
		t.Fatalf("the export has %v,\nwant acme's events oldest first %v", got, want)
	}
	for i, l := range lines {
		var ev map[string]any
		if err := json.Unmarshal(l, &ev); err != nil || ev["tenant"] != "acme" || ev["hash"] == "" {
			t.Fatalf("line %d: %v %s", i, err, l)
		}
	}
	if strings.Contains(d.body, "console-hidden-words") || strings.Contains(d.body, "globex") {
		t.Fatal("the export carries masked content or another tenant's events")
	}
	// Exactly the API's bytes.
	if _, api := h.export(h.token("acme", "auditor-1", "auditor"), ""); !slices.EqualFunc(api, lines, bytes.Equal) {
		t.Fatal("the download differs from GET /v1/audit/export")
	}
	// A window from the filters, and the OPA format.
	mid := eventTime(t, all[len(all)/2])
	from := mid.UTC().Format("2006-01-02T15:04:05.000")
	p = b.get("/console/audit?tool=read-file&from=" + from)
	m = regexp.MustCompile(`<a id="export-opa" class="button" href="([^"]+)"`).FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no OPA export link:\n%s", p.body)
	}
	exp, _ := url.Parse(html.UnescapeString(m[1]))
	if exp.Query().Get("from") != from || exp.Query().Has("tool") || exp.Query().Get("format") != "opa" {
		t.Fatalf("the export link %s does not carry the window alone", exp)
	}
	_, lines = download(exp.String())
	var want []string
	for _, e := range reversed(all) {
		if e["phase"] == "decision" && e["outcome"] != "invalid_arguments" && !eventTime(t, e).Before(mid) {
			want = append(want, e["decision_id"].(string))
		}
	}
	if got := lineIDs(t, lines, "decision_id"); len(want) == 0 || !slices.Equal(got, want) {
		t.Fatalf("the OPA export of the window has decisions %v, want %v", got, want)
	}
	// Bad export parameters: a page, not a file.
	for _, c := range []struct{ query, problem string }{
		{"format=xml", `The export format must be "ndjson" or "opa".`},
		{"from=2025-06-02T10:00&to=2025-06-01T10:00", "is after To"},
		{"to=soon", "To is not a date and time"},
	} {
		p := b.get("/console/audit/export?" + c.query)
		if p.status != http.StatusBadRequest || p.header.Get("Content-Disposition") != "" || !strings.Contains(html.UnescapeString(p.body), c.problem) {
			t.Errorf("export %s: %d %q\n%s", c.query, p.status, p.header.Get("Content-Disposition"), p.body)
		}
		assertConsoleHeaders(t, p)
	}

	// A developer gets none of it.
	dev := h.browser()
	dev.signIn(h.token("acme", "dana", "developer"))
	for _, path := range []string{"/console/audit", "/console/audit?tool=read-file", "/console/audit/" + all[0]["id"].(string), "/console/audit/export", "/console/audit/export?format=opa"} {
		p := dev.get(path)
		if p.status != http.StatusForbidden || p.header.Get("Content-Disposition") != "" || strings.Contains(p.body, all[0]["id"].(string)) {
			t.Errorf("GET %s as a developer: %d", path, p.status)
		}
		assertConsoleHeaders(t, p)
	}
	if p := dev.form("/console/", "/console/audit/verify", nil); p.status != http.StatusForbidden || strings.Contains(p.body, "verify-result") {
		t.Errorf("POST /console/audit/verify as a developer: %d", p.status)
	}
}

// waitProof reloads an event's page until its proof is no longer pending.
func (b *browser) waitProof(t *testing.T, id string) page {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := b.get("/console/audit/" + id)
		if p.status != 200 {
			t.Fatalf("event %s: %d\n%s", id, p.status, p.body)
		}
		if !strings.Contains(p.body, `data-status="pending"`) || time.Now().After(deadline) {
			return p
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Someone with the database but not the signing key changes an event:
// the event's page raises the alarm instead of showing it as proved.
func TestConsoleAuditEventProofCatchesTampering(t *testing.T) {
	t.Parallel()
	h, calls := auditScene(t)
	all := h.allEvents("acme", "")
	decisionOf := func(call string) string {
		for _, e := range all {
			if e["call_id"] == call && e["phase"] == "decision" {
				return e["id"].(string)
			}
		}
		t.Fatalf("no decision event of call %s", call)
		return ""
	}
	edited, rehashed, relabelled := decisionOf(calls["denied"]), decisionOf(calls["read"]), decisionOf(calls["write"])
	b := h.browser()
	b.signIn(h.token("acme", "erin", "auditor"))
	for _, id := range []string{edited, rehashed, relabelled} {
		if p := b.waitProof(t, id); !strings.Contains(p.body, `data-status="verified"`) {
			t.Fatalf("event %s is not verified before tampering:\n%s", id, p.body)
		}
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(h.dir, "audit.db")+"?_pragma=busy_timeout(30000)") // the gateway writes too
	must(t, err)
	defer db.Close()
	update := func(query string, args ...any) {
		t.Helper()
		res, err := db.Exec(query, args...)
		must(t, err)
		if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("%s changed %d rows", query, n)
		}
	}
	failed := func(id, reason string) {
		t.Helper()
		p := b.get("/console/audit/" + id)
		if p.status != 200 || !strings.Contains(p.body, `<section id="proof" class="item" data-status="failed"`) ||
			!strings.Contains(p.body, `<p class="problem" role="alert"><strong>Proof failed.</strong>`) ||
			!strings.Contains(html.UnescapeString(p.body), reason) || strings.Contains(p.body, "verified against checkpoint") {
			t.Errorf("event %s after tampering: %d, want the alarm %q:\n%s", id, p.status, reason, p.body)
		}
		assertConsoleHeaders(t, p)
	}

	// An edited event no longer hashes to its hash.
	update(`UPDATE audit_events SET raw = replace(raw, '"path":"secrets/db.env"', '"path":"docs/guide.md"') WHERE id = ?`, edited)
	failed(edited, "the event's content does not hash to its recorded hash")

	// An edited event whose hash was recomputed is no longer the tree's
	// entry: its inclusion proof fails against the signed checkpoint.
	var raw, oldHash string
	must(t, db.QueryRow(`SELECT raw, hash FROM audit_events WHERE id = ?`, rehashed).Scan(&raw, &oldHash))
	forged := strings.Replace(raw, `"principal":"bob"`, `"principal":"mallory"`, 1)
	if forged == raw {
		t.Fatalf("no principal to change in %s", raw)
	}
	newHash, err := audit.ComputeHash([]byte(forged))
	must(t, err)
	forged = strings.Replace(forged, oldHash, newHash, 1)
	update(`UPDATE audit_events SET raw = ?, hash = ? WHERE id = ?`, forged, newHash, rehashed)
	failed(rehashed, "the inclusion proof does not verify against checkpoint")

	// An event relabelled with a leaf version this console does not know
	// is not hashed by a rule that may not be its own: the alarm says why.
	update(`UPDATE audit_events SET raw = replace(raw, '"leaf_version":2', '"leaf_version":3') WHERE id = ?`, relabelled)
	failed(relabelled, "the event cannot be checked: unknown audit leaf version 3 of event")

	// The verify button agrees.
	p := b.form("/console/audit", "/console/audit/verify", nil)
	if p.status != 200 || !strings.Contains(p.body, `<section id="verify-result" data-ok="false"`) || !strings.Contains(p.body, "The log does not verify.") {
		t.Fatalf("verify after tampering: %d\n%s", p.status, p.body)
	}
}

// An event integrated after the latest checkpoint is shown as pending,
// with why, not as proved or failed.
func TestConsoleAuditEventProofPendingUntilACheckpointCoversIt(t *testing.T) {
	t.Parallel()
	h := start(t, func(s *setup) {
		// The first checkpoint is signed with the first integration, the
		// next one not within the test.
		s.auditYAML = "  driver: sqlite\n  dsn: audit.db\n  checkpoint_interval: 1h\n"
	})
	alice := h.token("acme", "alice", "developer")
	first := h.call(alice, "read-file", `{"arguments":{"path":"docs/guide.md"}}`).str("call_id")
	h.sync("acme")
	second := h.call(alice, "read-file", `{"arguments":{"path":"notes/todo.txt"}}`).str("call_id")
	h.sync("acme")
	b := h.browser()
	b.signIn(h.token("acme", "erin", "auditor"))
	verified := regexp.MustCompile(`verified against checkpoint (\d+)`)
	pending := regexp.MustCompile(`integrated at log index \d+; the latest checkpoint \(size (\d+)\) does not cover it yet`)
	var sizes []string
	for _, e := range h.allEvents("acme", "phase=decision") {
		p := b.get("/console/audit/" + e["id"].(string))
		assertConsoleHeaders(t, p)
		text := html.UnescapeString(p.body)
		switch e["call_id"] {
		case first:
			m := verified.FindStringSubmatch(text)
			if m == nil || !strings.Contains(p.body, `data-status="verified"`) {
				t.Fatalf("the first call's decision is not verified against the first checkpoint:\n%s", p.body)
			}
			sizes = append(sizes, m[1])
		case second:
			m := pending.FindStringSubmatch(text)
			if m == nil || !strings.Contains(p.body, `data-status="pending"`) {
				t.Fatalf("the second call's decision is not pending:\n%s", p.body)
			}
			sizes = append(sizes, m[1])
		default:
			t.Fatalf("unexpected event %v", e)
		}
	}
	if len(sizes) != 2 || sizes[0] != sizes[1] {
		t.Fatalf("checkpoint sizes %v: want the one checkpoint twice", sizes)
	}
}

// What an agent puts in its arguments reaches the console's pages only
// escaped: markup in a grep pattern is shown as text on the event page,
// never as HTML.
func TestConsoleShowsHostileArgumentsAsText(t *testing.T) {
	t.Parallel()
	h := start(t)
	r := h.call(h.token("acme", "alice", "developer"), "grep", `{"arguments":{"pattern":"<img src=x onerror=alert(1)><script>alert(2)</script>","path":"docs"}}`)
	if r.status != 200 {
		t.Fatalf("call: %d %s", r.status, r.raw)
	}
	h.sync("acme")
	ev := h.events("acme", "call_id="+r.str("call_id")+"&phase=decision")
	if len(ev) != 1 || ev[0]["outcome"] != "allow" {
		t.Fatalf("decision events: %v", ev)
	}
	b := h.browser()
	b.signIn(h.token("acme", "erin", "auditor"))
	for _, path := range []string{"/console/audit", "/console/audit/" + ev[0]["id"].(string)} {
		p := b.get(path)
		if p.status != 200 {
			t.Fatalf("%s: %d", path, p.status)
		}
		if strings.Contains(p.body, "<img src=x") || strings.Contains(p.body, "<script>alert") {
			t.Errorf("%s renders the argument as markup", path)
		}
		assertConsoleHeaders(t, p)
	}
	if p := b.get("/console/audit/" + ev[0]["id"].(string)); !strings.Contains(p.body, "&lt;script&gt;alert(2)&lt;/script&gt;") {
		t.Errorf("the event page does not show the argument as text")
	}
}
