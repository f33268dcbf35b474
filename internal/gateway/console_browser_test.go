package gateway

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// The console in a real browser: headless Chromium (Debian's chromium,
// which .ci/run installs) driven over the DevTools protocol. Set
// TOOLGATE_TEST_BROWSER=1 (as .ci/run does) and a missing Chromium fails
// the test instead of skipping it.

// chromiumPath finds the browser or ends the test.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome-stable", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("TOOLGATE_TEST_BROWSER") != "" {
		t.Fatal("TOOLGATE_TEST_BROWSER is set but no Chromium is installed (apt-get install chromium)")
	}
	t.Skip("no Chromium on this machine (apt-get install chromium); set TOOLGATE_TEST_BROWSER=1 to make this a failure")
	return ""
}

// screenshotDir is where the browser tests write a screenshot of each
// page: TOOLGATE_CONSOLE_SCREENSHOTS, or toolgate-console-screenshots in
// the temporary folder. Not committed; docs/console/ holds the ones
// docs/console.md shows.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("TOOLGATE_CONSOLE_SCREENSHOTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "toolgate-console-screenshots")
	}
	must(t, os.MkdirAll(dir, 0o755))
	return dir
}

// chrome is one headless browser on the console.
type chrome struct {
	t    *testing.T
	ctx  context.Context
	base string // the gateway's origin
	shot string // the screenshot folder

	mu       sync.Mutex
	requests []string // every URL the pages asked for
	problems []string // console errors, exceptions, CSP violations, failed loads
}

func newChrome(t *testing.T, base string) *chrome {
	t.Helper()
	path := chromiumPath(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // tests run as root in CI containers
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
		// Nothing but loopback: every other host goes to a proxy that is
		// not there (Chromium sends loopback direct), so a page that tried
		// to load from outside would fail, and be seen to.
		chromedp.ProxyServer("http://127.0.0.1:9"),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-pings", true),
		chromedp.Flag("dns-prefetch-disable", true),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 4*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
	})
	c := &chrome{t: t, ctx: ctx, base: base, shot: screenshotDir(t)}
	if err := chromedp.Listen(ctx, c.observe); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *chrome) observe(ev any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		c.requests = append(c.requests, ev.Request.URL)
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning {
			c.problems = append(c.problems, fmt.Sprintf("console.%s", ev.Type))
		}
	case *runtime.EventExceptionThrown:
		c.problems = append(c.problems, "exception: "+ev.ExceptionDetails.Text)
	case *cdplog.EventEntryAdded:
		if ev.Entry.Level == cdplog.EntryLevelError || ev.Entry.Level == cdplog.EntryLevelWarning {
			c.problems = append(c.problems, fmt.Sprintf("%s %s: %s (%s)", ev.Entry.Source, ev.Entry.Level, ev.Entry.Text, ev.Entry.URL))
		}
	}
}

// clean asserts that no page so far logged an error or a CSP violation
// and that every request went to the gateway (or an allowed origin),
// then forgets them.
func (c *chrome) clean(allowed ...string) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.problems {
		c.t.Errorf("browser problem: %s", p)
	}
	for _, u := range c.requests {
		ok := strings.HasPrefix(u, c.base+"/") || strings.HasPrefix(u, "data:")
		for _, a := range allowed {
			ok = ok || strings.HasPrefix(u, a+"/")
		}
		if !ok {
			c.t.Errorf("a page requested %s, outside the gateway", u)
		}
	}
	c.problems, c.requests = nil, nil
}

// forget drops what was observed (after a page that answers an error
// status on purpose: the browser logs the failed load).
func (c *chrome) forget() {
	c.mu.Lock()
	c.problems, c.requests = nil, nil
	c.mu.Unlock()
}

func (c *chrome) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	c.t.Helper()
	if err := chromedp.Do(c.ctx, steps...); err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

// open navigates to a console path and returns the response status.
func (c *chrome) open(path string) int64 {
	c.t.Helper()
	resp, err := chromedp.Run(c.ctx, chromedp.NavigateResponse(c.base+path))
	if err != nil {
		c.t.Fatalf("open %s: %v", path, err)
	}
	return resp.Status
}

// submit clicks a button (a CSS selector) and waits for the page it
// leads to; it returns that page's status.
func (c *chrome) submit(button string) int64 {
	c.t.Helper()
	resp, err := chromedp.RunResponse(c.ctx, chromedp.Click(chromedp.CSS(button)))
	if err != nil {
		c.t.Fatalf("submit %s: %v", button, err)
	}
	return resp.Status
}

func (c *chrome) text(css string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 20*time.Second) // an element that is not there fails, not hangs
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(css)))
	if err != nil {
		c.t.Fatalf("text of %s: %v", css, err)
	}
	return s
}

func (c *chrome) path() string {
	c.t.Helper()
	loc, err := chromedp.Run(c.ctx, chromedp.Location())
	if err != nil {
		c.t.Fatal(err)
	}
	u, err := url.Parse(loc)
	if err != nil {
		c.t.Fatal(err)
	}
	return u.Path
}

func (c *chrome) eval(js string) bool {
	c.t.Helper()
	v, err := chromedp.Run(c.ctx, chromedp.Evaluate[bool](js))
	if err != nil {
		c.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// screenshot writes a full-page PNG of the current page.
func (c *chrome) screenshot(name string) {
	c.t.Helper()
	png, err := chromedp.Run(c.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		c.t.Fatalf("screenshot %s: %v", name, err)
	}
	must(c.t, os.WriteFile(filepath.Join(c.shot, name+".png"), png, 0o644))
}

// fits reports whether the page needs no horizontal scrolling.
func (c *chrome) fits() bool {
	return c.eval(`document.documentElement.scrollWidth <= window.innerWidth + 1`)
}

// signIn signs in through the form, typing the token as a user would.
func (c *chrome) signIn(token string) {
	c.t.Helper()
	if st := c.open("/console/"); st != 200 || c.path() != "/console/login" {
		c.t.Fatalf("unauthenticated overview: %d at %s", st, c.path())
	}
	c.do("type the token", chromedp.SetValue(chromedp.ID("token"), token))
	if st := c.submit(`form[action="/console/login"] button[type=submit]`); st != 200 || c.path() != "/console/" {
		c.t.Fatalf("sign-in: %d at %s", st, c.path())
	}
}

func TestConsoleInChromium(t *testing.T) {
	t.Parallel() // its own gateway, workspace and database; mostly waiting
	if testing.Short() {
		t.Skip("starts a browser")
	}
	chromiumPath(t)
	h := start(t)
	alice := h.token("acme", "alice", "developer")
	held := approvalID(t, h.held(alice, "2"))
	c := newChrome(t, h.base)
	t.Logf("screenshots: %s", c.shot)

	// Sign-in page, then sign in with the keyboard: Tab from the top
	// reaches the skip link first, the token field takes typed keys, and
	// Enter submits.
	if st := c.open("/console/"); st != 200 || c.path() != "/console/login" {
		t.Fatalf("unauthenticated: %d at %s", st, c.path())
	}
	c.screenshot("login")
	admin := h.token("acme", "root", "auditor", "approver", "policy-admin")
	c.do("focus the token field", chromedp.Focus(chromedp.ID("token")))
	c.do("type the token", chromedp.SendKeys(chromedp.ID("token"), admin))
	resp, err := chromedp.RunResponse(c.ctx, chromedp.KeyEvent("\r"))
	if err != nil || resp.Status != 200 || c.path() != "/console/" {
		t.Fatalf("sign-in with Enter: %v %v at %s", err, resp, c.path())
	}
	c.screenshot("overview")
	c.do("tab", chromedp.KeyEvent("\t"))
	if !c.eval(`document.activeElement !== null && document.activeElement.classList.contains("skip")`) {
		t.Error("the first Tab stop of a page is not the skip link")
	}
	if !c.fits() {
		t.Error("the overview scrolls sideways at 1280×800")
	}
	c.clean()

	// Audit: search by tool, open an event, see its proof status; verify
	// the tenant's log with the button.
	for _, path := range []string{"docs/guide.md", "secrets/db.env"} {
		h.call(alice, "read-file", `{"arguments":{"path":"`+path+`"}}`)
	}
	h.sync("acme") // searches see events once integrated into the log
	if st := c.open("/console/audit"); st != 200 {
		t.Fatalf("audit: %d", st)
	}
	c.do("filter by tool", chromedp.SetValue(chromedp.ID("f-tool"), "read-file"))
	if st := c.submit("#audit-search button[type=submit]"); st != 200 || !strings.Contains(c.text("#events"), "read-file") || strings.Contains(c.text("#events"), "write-file") {
		t.Fatalf("audit search by tool: %d", st)
	}
	c.screenshot("audit")
	if st := c.submit("#events tbody tr td a"); st != 200 || !strings.HasPrefix(c.path(), "/console/audit/") {
		t.Fatalf("open an event: %d at %s", st, c.path())
	}
	if status, err := chromedp.Run(c.ctx, chromedp.Evaluate[string](`document.querySelector("section#proof").dataset.status`)); err != nil || status == "" || status == "failed" {
		t.Errorf("proof status %q (%v)", status, err)
	}
	c.screenshot("audit-event")
	c.open("/console/audit")
	if st := c.submit("#verify button[type=submit]"); st != 200 {
		t.Fatalf("verify: %d", st)
	}
	if ok, err := chromedp.Run(c.ctx, chromedp.Evaluate[string](`document.querySelector("#verify-result").dataset.ok`)); err != nil || ok != "true" {
		t.Errorf("verify result %q (%v)", ok, err)
	}
	c.clean()

	// Policy: evaluate a would-be call in the playground — a secret the
	// shipped pack refuses to a developer.
	if st := c.open("/console/policy"); st != 200 {
		t.Fatalf("policy: %d", st)
	}
	c.do("playground", chromedp.SetValue(chromedp.ID("eval-tool"), "read-file"),
		chromedp.SetValue(chromedp.ID("eval-principal"), "alice"),
		chromedp.SetValue(chromedp.ID("eval-roles"), "developer"),
		chromedp.SetValue(chromedp.ID("eval-arguments"), `{"path":"secrets/db.env"}`))
	if st := c.submit("#playground button[type=submit]"); st != 200 {
		t.Fatalf("evaluate: %d", st)
	}
	if res, err := chromedp.Run(c.ctx, chromedp.Evaluate[string](`document.querySelector("#eval-result").dataset.result`)); err != nil || res != "denied" {
		t.Errorf("playground result %q (%v), want denied", res, err)
	}
	c.screenshot("policy")
	c.clean()

	// The overview draws the tenant's calls as an SVG chart.
	c.open("/console/")
	if n, err := chromedp.Run(c.ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg#calls-chart[role=img] rect").length`)); err != nil || n == 0 {
		t.Errorf("overview chart: %d bars (%v)", n, err)
	}
	c.screenshot("overview-data")
	c.clean()

	// A forged cross-site form post (another site's page with a form
	// aimed at the console) changes nothing: the browser marks it
	// cross-site and sends no session cookie.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	evil := "http://localhost:" + port // another site than 127.0.0.1
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><title>prize</title><form method="post" action="%s/console/approvals/%s/approve"><input type="hidden" name="csrf" value="guess"><button id="win" type="submit">Win</button></form>`, h.base, held)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	_, err = chromedp.Run(c.ctx, chromedp.NavigateResponse(evil+"/"))
	must(t, err)
	if st := c.submit("#win"); st != http.StatusForbidden {
		t.Errorf("forged cross-site post: status %d, want 403", st)
	}
	c.forget()
	if st := c.open("/console/"); st != 200 || c.path() != "/console/" || h.g.console.Sessions() != 1 {
		t.Fatalf("after the forged post the session is gone: %d at %s", st, c.path())
	}
	if p := h.do("GET", "/v1/approvals/"+held, h.token("acme", "bob", "approver"), nil); p.str("status") != "pending" || h.release() != "1\n" {
		t.Fatalf("the forged post changed the approval: %s", p.raw)
	}
	c.clean()

	// Approvals: approve the held call with a comment — it runs; deny a
	// second one — it never does.
	if st := c.open("/console/approvals"); st != 200 {
		t.Fatalf("approvals: %d", st)
	}
	c.screenshot("approvals")
	c.do("comment", chromedp.SendKeys(chromedp.ID("comment-"+held), "release window confirmed"))
	if st := c.submit("#approve-button-" + held); st != 200 || !strings.Contains(c.text("p.notice"), "Approved") {
		t.Fatalf("approve: %d", st)
	}
	if h.release() != "2" {
		t.Fatalf("the approved call did not run: %q", h.release())
	}
	if got := c.text("#decided-" + held + " .comment"); !strings.Contains(got, "release window confirmed") {
		t.Errorf("decided row comment: %q", got)
	}
	second := approvalID(t, h.held(alice, "3"))
	c.open("/console/approvals")
	c.do("deny comment", chromedp.SendKeys(chromedp.ID("deny-comment-"+second), "not today"))
	if st := c.submit("#deny-button-" + second); st != 200 || !strings.Contains(c.text("p.notice"), "Denied") {
		t.Fatalf("deny: %d", st)
	}
	if h.release() != "2" {
		t.Fatalf("the denied call ran: %q", h.release())
	}
	c.screenshot("approvals-decided")
	c.clean()

	// Phone width: every page fits without sideways scrolling.
	c.do("phone", chromedp.EmulateViewport(390, 844))
	for _, p := range []string{"/console/", "/console/audit", "/console/approvals", "/console/policy"} {
		if st := c.open(p); st != 200 {
			t.Fatalf("%s at phone width: %d", p, st)
		}
		if !c.fits() {
			t.Errorf("%s scrolls sideways at 390 px", p)
		}
		// Every form field has a label a screen reader announces, and
		// every button a name.
		unlabelled, err := chromedp.Run(c.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("input:not([type=hidden]),select,textarea,button")]
			.filter(e => e.tagName === "BUTTON" ? e.textContent.trim() === "" && !e.getAttribute("aria-label")
				: !(e.labels && e.labels.length) && !e.getAttribute("aria-label"))
			.map(e => e.tagName + "#" + (e.id || e.name))`))
		if err != nil || len(unlabelled) > 0 {
			t.Errorf("%s: fields without a label: %v (%v)", p, unlabelled, err)
		}
		c.screenshot("phone-" + strings.Trim(strings.ReplaceAll(p, "/", "-"), "-"))
	}
	c.do("desktop", chromedp.EmulateViewport(1280, 800))
	c.clean()

	// A role without access: 403 for the page, no link to it.
	dev := newChrome(t, h.base)
	dev.signIn(h.token("acme", "dana", "developer"))
	if n, err := chromedp.Run(dev.ctx, chromedp.Evaluate[int](`document.querySelectorAll('a[href="/console/approvals"]').length`)); err != nil || n != 0 {
		t.Errorf("a developer sees a link to approvals (%d, %v)", n, err)
	}
	if st := dev.open("/console/approvals"); st != http.StatusForbidden || !strings.Contains(dev.text("main"), "approver role") {
		t.Errorf("developer on approvals: %d", st)
	}
	dev.screenshot("forbidden")
	dev.forget()
}
