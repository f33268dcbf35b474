package gateway

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/toolgate/toolgate/internal/auth"
)

// Every console response carries the security headers: a CSP without
// inline script, no framing, no referrer, no sniffing.
func assertConsoleHeaders(t *testing.T, p page) {
	t.Helper()
	csp := p.header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "form-action 'self'", "base-uri 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("%s: CSP %q lacks %q", p.url, csp, want)
		}
	}
	if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") || strings.Contains(csp, "*") {
		t.Errorf("%s: CSP %q allows inline code or any origin", p.url, csp)
	}
	if p.header.Get("X-Content-Type-Options") != "nosniff" || p.header.Get("Referrer-Policy") != "same-origin" {
		t.Errorf("%s: headers %v", p.url, p.header)
	}
	if strings.Contains(p.body, "<script>") || strings.Contains(p.body, " style=") || strings.Contains(p.body, " onclick=") {
		t.Errorf("%s: inline script or style in the page", p.url)
	}
}

func TestConsoleSignInWithATokenAndSessionCookie(t *testing.T) {
	t.Parallel()
	h := start(t)
	b := h.browser()

	// Unauthenticated: every page leads to the sign-in form, remembering
	// where the user was going.
	p := b.get("/console/audit?tool=read-file")
	if p.status != 200 || p.url.Path != "/console/login" || p.url.Query().Get("next") != "/console/audit?tool=read-file" {
		t.Fatalf("unauthenticated page: %d at %s", p.status, p.url)
	}
	assertConsoleHeaders(t, p)
	if !strings.Contains(p.body, `name="token"`) || !strings.Contains(p.body, `<label for="token"`) {
		t.Fatalf("sign-in form lacks a labelled token field:\n%s", p.body)
	}

	// A wrong token: 401, no session.
	bad := b.post("/console/login", url.Values{"csrf": {p.csrf(t)}, "token": {"not-a-key"}})
	if bad.status != http.StatusUnauthorized || !strings.Contains(bad.body, "The token was not accepted.") {
		t.Fatalf("wrong token: %d\n%s", bad.status, bad.body)
	}
	if h.g.console.Sessions() != 0 {
		t.Fatal("a refused sign-in opened a session")
	}

	auditor := h.token("acme", "erin", "auditor")
	p = b.post("/console/login", url.Values{"csrf": {bad.csrf(t)}, "token": {"Bearer " + auditor}, "next": {"/console/audit?tool=read-file"}})
	if p.status == 404 || p.url.Path != "/console/audit" || p.url.RawQuery != "tool=read-file" {
		t.Fatalf("sign-in did not return to the page asked for: %d at %s", p.status, p.url)
	}

	// The cookie: HttpOnly, SameSite=Strict, a random id — never the token.
	u, _ := url.Parse(h.base + "/console/")
	cookies := b.client.Jar.Cookies(u)
	if len(cookies) != 1 || cookies[0].Name != "toolgate_console" {
		t.Fatalf("cookies after sign-in: %v", cookies)
	}
	if strings.Contains(cookies[0].Value, auditor) || strings.Contains(auditor, cookies[0].Value) {
		t.Fatal("the cookie carries the bearer token")
	}
	// Set-Cookie attributes, from a fresh sign-in.
	b2 := h.browser()
	login := b2.get("/console/login")
	req, _ := http.NewRequest("POST", h.base+"/console/login", strings.NewReader(url.Values{"csrf": {login.csrf(t)}, "token": {auditor}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for _, c := range b2.client.Jar.Cookies(u) {
		req.AddCookie(c)
	}
	raw, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw.Body.Close()
	var set string
	for _, v := range raw.Header.Values("Set-Cookie") {
		if strings.HasPrefix(v, "toolgate_console=") {
			set = v
		}
	}
	if raw.StatusCode != http.StatusSeeOther || !strings.Contains(set, "HttpOnly") || !strings.Contains(set, "SameSite=Strict") || !strings.Contains(set, "Path=/") {
		t.Fatalf("session cookie: %d %q", raw.StatusCode, set)
	}

	// A redirect after sign-in never leaves the console.
	for _, next := range []string{"https://evil.example/", "//evil.example/x", "/v1/tools", "/console/\\evil", "javascript:alert(1)"} {
		b3 := h.browser()
		l := b3.get("/console/login")
		p := b3.post("/console/login", url.Values{"csrf": {l.csrf(t)}, "token": {auditor}, "next": {next}})
		if p.url.Host != u.Host || p.url.Path != "/console/" {
			t.Errorf("next=%q led to %s", next, p.url)
		}
	}

	// A signed-in browser asking for the sign-in page goes on to where
	// it was going.
	if again := b.get("/console/login?next=/console/audit"); again.url.Path != "/console/audit" {
		t.Fatalf("the sign-in page of a signed-in browser: %s", again.url)
	}

	// Sign out ends the session on the server.
	out := b.form("/console/", "/console/logout", nil)
	if out.url.Path != "/console/login" {
		t.Fatalf("sign out: %d at %s", out.status, out.url)
	}
	if p := b.get("/console/"); p.url.Path != "/console/login" {
		t.Fatalf("after sign out the overview is still served: %s", p.url)
	}
}

// The sign-in form itself refuses a post without its own CSRF token (a
// site cannot sign a victim in as the attacker).
func TestConsoleSignInFormNeedsItsCSRFToken(t *testing.T) {
	t.Parallel()
	h := start(t)
	b := h.browser()
	b.get("/console/login")
	p := b.post("/console/login", url.Values{"token": {h.token("acme", "erin", "auditor")}})
	if p.status != http.StatusForbidden || h.g.console.Sessions() != 0 {
		t.Fatalf("sign-in without the form's token: %d, %d sessions", p.status, h.g.console.Sessions())
	}
	// A token from another browser's form does not count either.
	other := h.browser().get("/console/login").csrf(t)
	p = b.post("/console/login", url.Values{"csrf": {other}, "token": {h.token("acme", "erin", "auditor")}})
	if p.status != http.StatusForbidden || h.g.console.Sessions() != 0 {
		t.Fatalf("sign-in with another form's token: %d, %d sessions", p.status, h.g.console.Sessions())
	}
}

// A forged cross-site form post changes nothing: without the session's
// CSRF token, with a browser's cross-site marker, or from another origin,
// the request is refused and the session survives.
func TestConsoleRefusesForgedAndCrossSiteForms(t *testing.T) {
	t.Parallel()
	h := start(t)
	b := h.browser()
	b.signIn(h.token("acme", "bob", "approver", "auditor"))

	cases := []struct {
		name   string
		form   url.Values
		header []string
	}{
		{"no CSRF token", url.Values{}, nil},
		{"a wrong CSRF token", url.Values{"csrf": {"AAAA"}}, nil},
		{"Sec-Fetch-Site cross-site", nil, []string{"Sec-Fetch-Site", "cross-site"}},
		{"Sec-Fetch-Site same-site", nil, []string{"Sec-Fetch-Site", "same-site"}},
		{"another Origin", nil, []string{"Origin", "https://evil.example"}},
	}
	for _, c := range cases {
		form := c.form
		if form == nil {
			form = url.Values{"csrf": {b.get("/console/").csrf(t)}}
		}
		p := b.post("/console/logout", form, c.header...)
		if p.status != http.StatusForbidden || !strings.Contains(p.body, "Nothing was changed") {
			t.Errorf("%s: %d at %s", c.name, p.status, p.url)
		}
		if h.g.console.Sessions() != 1 || b.get("/console/").url.Path != "/console/" {
			t.Fatalf("%s: the forged sign-out ended the session", c.name)
		}
	}
	// A post from a browser without the cookie (what SameSite=Strict makes
	// of a cross-site form) goes to the sign-in page and changes nothing.
	anon := h.browser()
	p := anon.post("/console/logout", url.Values{}, "Origin", "", "Sec-Fetch-Site", "")
	if p.url.Path != "/console/login" || h.g.console.Sessions() != 1 {
		t.Fatalf("cookie-less post: %d at %s", p.status, p.url)
	}
}

// Pages a role may not use are not linked and answer 403.
func TestConsoleRolesGatePages(t *testing.T) {
	t.Parallel()
	h := start(t)
	b := h.browser()
	home := b.signIn(h.token("acme", "dana", "developer"))
	assertConsoleHeaders(t, home)
	for _, link := range []string{`href="/console/audit"`, `href="/console/approvals"`, `href="/console/policy"`} {
		if strings.Contains(home.body, link) {
			t.Errorf("a developer's overview links %s", link)
		}
	}
	for _, path := range []string{"/console/audit", "/console/audit/x", "/console/audit/export", "/console/approvals", "/console/policy"} {
		if p := b.get(path); p.status != http.StatusForbidden {
			t.Errorf("GET %s as developer: %d", path, p.status)
		}
	}
	for _, path := range []string{"/console/approvals/x/approve", "/console/approvals/x/deny", "/console/policy/eval", "/console/policy/replay", "/console/audit/verify"} {
		if p := b.form("/console/", path, nil); p.status != http.StatusForbidden {
			t.Errorf("POST %s as developer: %d", path, p.status)
		}
	}

	admin := h.browser()
	home = admin.signIn(h.token("acme", "root", "auditor", "approver", "policy-admin"))
	for _, link := range []string{`href="/console/audit"`, `href="/console/approvals"`, `href="/console/policy"`} {
		if !strings.Contains(home.body, link) {
			t.Errorf("an administrator's overview lacks %s", link)
		}
	}
}

// A session never outlives its credential: an expired JWT ends it on the
// next request, and so does a credential that no longer verifies.
func TestConsoleSessionEndsWithTheCredential(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	h := start(t, func(s *setup) { s.clock = clock })
	j := h.g.cfg.Auth.JWT
	short, err := auth.MintHS256(h.secret, auth.MintClaims{Tenant: "acme", Subject: "erin", Roles: []string{"auditor"},
		TTL: 2 * time.Second, Issuer: j.Issuer, Audience: j.Audience}, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	b := h.browser()
	b.signIn(short)
	if p := b.get("/console/"); p.url.Path != "/console/" {
		t.Fatalf("a session of a valid token was sent to %s", p.url.Path)
	}
	clock.Advance(2*time.Second + j.Leeway + time.Second) // past exp and the leeway
	if p := b.get("/console/"); p.url.Path == "/console/" {
		t.Fatal("the session outlived its token")
	}
	if h.g.console.Sessions() != 0 {
		t.Fatalf("%d sessions after the token expired", h.g.console.Sessions())
	}
}

func TestConsoleUnknownPagesAndStaticAssets(t *testing.T) {
	t.Parallel()
	h := start(t)
	b := h.browser()
	b.signIn(h.token("acme", "erin", "auditor"))
	if p := b.get("/console/nope"); p.status != http.StatusNotFound {
		t.Fatalf("unknown page: %d", p.status)
	}
	for _, asset := range []string{"/console/static/console.css", "/console/static/console.js", "/console/static/favicon.svg"} {
		p := b.get(asset)
		if p.status != 200 || p.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: %d", asset, p.status)
		}
	}
	if p := h.browser().get("/console"); p.url.Path != "/console/login" {
		t.Fatalf("/console: %s", p.url)
	}
}

// The console's routes are those of docs/console.md "Console": stable, so
// bookmarks and links from alerts keep working.
func TestConsoleRoutesAreTheDocumentedOnes(t *testing.T) {
	t.Parallel()
	h := start(t)
	var served []string
	err := chi.Walk(h.g.handler.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if route == "/console" || strings.HasPrefix(route, "/console/") {
			served = append(served, method+" "+route)
		}
		return nil
	})
	must(t, err)
	sort.Strings(served)
	want := []string{
		"GET /console/", "GET /console/approvals", "GET /console/audit", "GET /console/audit/export", "GET /console/audit/{id}",
		"GET /console/login", "GET /console/oidc/callback", "GET /console/oidc/login", "GET /console/policy", "GET /console/questions",
		"GET /console/static/*",
		"POST /console/approvals/{id}/approve", "POST /console/approvals/{id}/deny", "POST /console/audit/verify",
		"POST /console/login", "POST /console/logout", "POST /console/policy/eval", "POST /console/policy/replay",
		"POST /console/questions/{id}/answer",
	}
	if fmt.Sprint(served) != fmt.Sprint(want) {
		t.Fatalf("console routes:\n got %v\nwant %v", served, want)
	}
}

// Oversized and malformed forms are refused with 400 and change nothing:
// the sign-in form (64 KiB) and a signed-in form (limits.max_body_bytes).
func TestConsoleRefusesOversizedForms(t *testing.T) {
	t.Parallel()
	h := start(t)
	b := h.browser()
	login := b.get("/console/login")
	huge := strings.Repeat("A", 70<<10)
	if p := b.post("/console/login", url.Values{"csrf": {login.csrf(t)}, "token": {huge}}); p.status != http.StatusBadRequest || h.g.console.Sessions() != 0 {
		t.Fatalf("oversized sign-in: %d, %d sessions", p.status, h.g.console.Sessions())
	}
	b.signIn(h.token("acme", "bob", "approver"))
	alice := h.token("acme", "alice", "developer")
	id := approvalID(t, h.held(alice, "2"))
	p := b.form("/console/approvals", "/console/approvals/"+id+"/approve", url.Values{"comment": {strings.Repeat("x", 70<<10)}})
	if p.status != http.StatusBadRequest || h.release() != "1\n" {
		t.Fatalf("oversized approve form: %d, release %q", p.status, h.release())
	}
	// A form field given twice is refused, not merged.
	p = b.form("/console/approvals", "/console/approvals/"+id+"/approve", url.Values{"comment": {"a", "b"}})
	if p.status != http.StatusBadRequest || h.release() != "1\n" {
		t.Fatalf("duplicated comment: %d, release %q", p.status, h.release())
	}
	if a := h.do("GET", "/v1/approvals/"+id, h.token("acme", "bob", "approver"), nil); a.str("status") != "pending" {
		t.Fatalf("the approval changed: %s", a.raw)
	}
}

// A browser's concurrent requests share its session: each verifies the
// credential on its own and none writes the shared record (the race
// detector runs this in CI).
func TestConsoleConcurrentRequestsOfOneSession(t *testing.T) {
	t.Parallel()
	h := start(t)
	b := h.browser()
	b.signIn(h.token("acme", "root", "auditor", "approver", "policy-admin"))
	var wg sync.WaitGroup
	for _, path := range []string{"/console/", "/console/audit", "/console/approvals", "/console/policy", "/console/", "/console/audit", "/console/approvals", "/console/policy"} {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, h.base+path, nil)
			resp, err := b.client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("%s: %d", path, resp.StatusCode)
			}
		})
	}
	wg.Wait()
}
