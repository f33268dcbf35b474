package gateway

import (
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// browser is a console user agent without JavaScript: a cookie jar that
// follows redirects like a browser and sends what a same-origin form
// post sends.
type browser struct {
	t      testing.TB
	h      *harness
	client *http.Client
}

func (h *harness) browser() *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		h.t.Fatal(err)
	}
	return &browser{t: h.t, h: h, client: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

// page is one console response after redirects.
type page struct {
	status int
	url    *url.URL // where the redirects ended
	header http.Header
	body   string
}

func (b *browser) get(path string) page {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.h.base+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.send(req)
}

// post submits a form as a same-origin browser does (Origin and
// Sec-Fetch-Site set), with extra header pairs overriding them.
func (b *browser) post(path string, form url.Values, header ...string) page {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.h.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.h.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
		} else {
			req.Header.Set(header[i], header[i+1])
		}
	}
	return b.send(req)
}

func (b *browser) send(req *http.Request) page {
	b.t.Helper()
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return page{status: resp.StatusCode, url: resp.Request.URL, header: resp.Header, body: string(raw)}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the CSRF token of the forms of a page.
func (p page) csrf(t testing.TB) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no CSRF field on %s (%d):\n%s", p.url, p.status, p.body)
	}
	return html.UnescapeString(m[1])
}

// signIn signs in with a bearer token through the sign-in form and
// returns the overview.
func (b *browser) signIn(token string) page {
	b.t.Helper()
	login := b.get("/console/login")
	if login.status != 200 {
		b.t.Fatalf("sign-in page: %d %s", login.status, login.body)
	}
	p := b.post("/console/login", url.Values{"csrf": {login.csrf(b.t)}, "token": {token}})
	if p.status != 200 || p.url.Path != "/console/" {
		b.t.Fatalf("sign-in: %d at %s\n%s", p.status, p.url, p.body)
	}
	return p
}

// form submits a form of the page at from: its CSRF token plus values.
func (b *browser) form(from, action string, values url.Values, header ...string) page {
	b.t.Helper()
	p := b.get(from)
	if p.status != 200 {
		b.t.Fatalf("%s: %d %s", from, p.status, p.body)
	}
	if values == nil {
		values = url.Values{}
	}
	values.Set("csrf", p.csrf(b.t))
	return b.post(action, values, header...)
}
