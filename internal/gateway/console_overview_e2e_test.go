package gateway

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// The overview counts the tenant's decisions of the last 24 hours from
// its audit log: per outcome, per tool and outcome, in an SVG chart, with
// latency percentiles; approvers see how many held calls wait.
func TestConsoleOverviewCountsTheTenantsDecisions(t *testing.T) {
	t.Parallel()
	h := start(t, withRateLimits(t, perPrincipalWrites))
	alice, bob := h.token("acme", "alice", "developer"), h.token("acme", "bob", "developer")
	for _, c := range []struct {
		token, tool, body string
		status            int
		outcome           string
	}{
		{alice, "read-file", `{"arguments":{"path":"docs/guide.md"}}`, 200, "ok"},
		{alice, "read-file", `{"arguments":{"path":"src/app.py"}}`, 200, "ok"},
		{alice, "read-file", `{"arguments":{"path":"secrets/db.env"}}`, 200, "denied"},
		{alice, "read-file", `{"arguments":{"path":"../x"}}`, 200, "invalid_arguments"},
		{h.token("acme", "vera", "viewer"), "write-file", writeBody("docs/v.txt"), 200, "unavailable"},
		{alice, "write-file", writeBody("notes/a.txt"), 200, "ok"},
		{alice, "write-file", writeBody("notes/b.txt"), 200, "ok"},
		{alice, "write-file", writeBody("notes/c.txt"), 429, ""}, // over alice's write limit
		{bob, "write-file", writeBody("release/VERSION"), 200, "approval_required"},
		// Another tenant's calls are not counted.
		{h.token("globex", "gina", "developer"), "read-file", `{"arguments":{"path":"docs/guide.md"}}`, 200, "ok"},
		{h.token("globex", "gina", "developer"), "read-file", `{"arguments":{"path":"../x"}}`, 200, "invalid_arguments"},
	} {
		r := h.call(c.token, c.tool, c.body)
		if r.status != c.status || (c.outcome != "" && r.str("outcome") != c.outcome) {
			t.Fatalf("%s %s: %d %s", c.tool, c.body, r.status, r.raw)
		}
	}
	h.sync("acme")
	h.sync("globex")

	b := h.browser()
	p := b.signIn(h.token("acme", "root", "auditor", "approver"))
	if p.status != 200 {
		t.Fatalf("overview: %d", p.status)
	}
	assertConsoleHeaders(t, p)
	for outcome, want := range map[string]string{
		"allow": "4", "denied": "1", "invalid_arguments": "1", "unavailable": "1", "rate_limited": "1", "approval_required": "1",
	} {
		wantByID(t, p, "count-"+outcome, want)
	}
	wantByID(t, p, "count-events", "9")
	wantByID(t, p, "rate-limited", "1")
	// Calls failed closed write no audit event: the process's own count
	// (all tenants) is shown, and none failed closed here.
	wantByID(t, p, "failed-closed-total", "0")
	wantByID(t, p, "count-pending-approvals", "1")
	if strings.Contains(p.body, `id="count-other"`) || strings.Contains(p.body, `id="truncated"`) {
		t.Error("the overview shows other outcomes or a cut-off that do not exist")
	}

	// The chart: inline SVG with an accessible name, one <title> per bar
	// segment, and no style attribute (the CSP forbids them).
	svg := regexp.MustCompile(`(?s)<svg id="calls-chart"[^>]*>.*?</svg>`).FindString(p.body)
	if svg == "" || !strings.Contains(svg, `role="img"`) || !strings.Contains(svg, `aria-label="Decisions per hour by outcome`) {
		t.Fatalf("no accessible chart:\n%s", p.body)
	}
	// All nine decisions fall into at most two hours (a test spanning the
	// hour): the segments' counts add up to nine.
	sum := 0
	for _, m := range regexp.MustCompile(`<rect [^>]*><title>[^<]*: (\d+) [a-z_]+</title></rect>`).FindAllStringSubmatch(svg, -1) {
		sum += atoi(t, m[1])
	}
	if sum != 9 {
		t.Errorf("chart segments add up to %d decisions, want 9:\n%s", sum, svg)
	}
	if strings.Contains(svg, "style=") || strings.Contains(svg, "<script") {
		t.Error("the chart carries a style attribute or a script")
	}

	// Per tool and outcome.
	table := regexp.MustCompile(`(?s)<table class="responsive" id="by-tool">.*?</table>`).FindString(p.body)
	cell := func(tool, outcome string) string {
		row := regexp.MustCompile(`(?s)<tr data-tool="` + tool + `">.*?</tr>`).FindString(table)
		m := regexp.MustCompile(`data-outcome="` + outcome + `">(\d+)<`).FindStringSubmatch(row)
		if m == nil {
			return ""
		}
		return m[1]
	}
	for _, c := range []struct{ tool, outcome, want string }{
		{"read-file", "allow", "2"}, {"read-file", "denied", "1"}, {"read-file", "invalid_arguments", "1"}, {"read-file", "rate_limited", "0"},
		{"write-file", "allow", "2"}, {"write-file", "rate_limited", "1"}, {"write-file", "approval_required", "1"}, {"write-file", "unavailable", "1"},
	} {
		if got := cell(c.tool, c.outcome); got != c.want {
			t.Errorf("by-tool %s × %s = %q, want %s", c.tool, c.outcome, got, c.want)
		}
	}

	// Latency percentiles of the decisions measured.
	if !strings.Contains(p.body, `<dl class="props" id="latency">`) {
		t.Fatal("no dl#latency")
	}
	wantByID(t, p, "latency-n", "9")
	for _, id := range []string{"latency-p50", "latency-p90", "latency-p99"} {
		if v, _ := byID(p.body, id); !regexp.MustCompile(`^\d+(\.\d+)? (µs|ms|s)$`).MatchString(v) {
			t.Errorf("#%s = %q", id, v)
		}
	}

	// globex's auditor sees globex's two decisions only.
	g := h.browser()
	p = g.signIn(h.token("globex", "gil", "auditor"))
	wantByID(t, p, "count-events", "2")
	wantByID(t, p, "count-allow", "1")
	wantByID(t, p, "count-invalid_arguments", "1")
	wantByID(t, p, "count-denied", "0")
	if strings.Contains(p.body, `id="count-pending-approvals"`) {
		t.Error("a user without the approver role sees the pending approvals")
	}
}

// Without the auditor role the overview shows no audit data: a welcome
// with the pages the roles allow, and the pending count for approvers.
func TestConsoleOverviewShowsNoDataWithoutTheAuditorRole(t *testing.T) {
	t.Parallel()
	h := start(t)
	if r := h.call(h.token("acme", "alice", "developer"), "read-file", `{"arguments":{"path":"docs/guide.md"}}`); r.status != 200 {
		t.Fatalf("call: %d %s", r.status, r.raw)
	}
	h.sync("acme")

	b := h.browser()
	p := b.signIn(h.token("acme", "dana", "developer"))
	if p.status != 200 {
		t.Fatalf("overview as developer: %d", p.status)
	}
	assertConsoleHeaders(t, p)
	for _, leak := range []string{`id="calls-chart"`, `id="count-allow"`, `id="by-tool"`, `id="latency"`, `id="count-pending-approvals"`, "read-file"} {
		if strings.Contains(p.body, leak) {
			t.Errorf("a developer's overview shows %s", leak)
		}
	}
	if !strings.Contains(p.body, "none of the console's roles") {
		t.Error("the developer is not told why there is nothing to see")
	}

	a := h.browser()
	p = a.signIn(h.token("acme", "bob", "approver", "policy-admin"))
	if p.status != http.StatusOK {
		t.Fatalf("overview as approver: %d", p.status)
	}
	assertConsoleHeaders(t, p)
	wantByID(t, p, "count-pending-approvals", "0")
	if strings.Contains(p.body, `id="calls-chart"`) || strings.Contains(p.body, `id="count-allow"`) {
		t.Error("an approver without the auditor role sees audit data")
	}
	for _, link := range []string{`<a href="/console/approvals">Approvals</a>`, `<a href="/console/policy">Policy</a>`} {
		if !strings.Contains(p.body, `<li class="card">`+link) {
			t.Errorf("the welcome lacks %s", link)
		}
	}
	if strings.Contains(p.body, `<li class="card"><a href="/console/audit">`) {
		t.Error("the welcome links the audit log without the auditor role")
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("not a number: %q", s)
		}
		n = n*10 + int(c-'0')
	}
	return n
}
