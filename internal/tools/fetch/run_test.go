package fetch

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/tools"
)

// echo answers with what it received.
func echo(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "method=%s uri=%s host=%s ua=%s x-echo=%s ct=%s body=%s",
		r.Method, r.RequestURI, r.Host, r.UserAgent(), r.Header.Get("X-Echo"), r.Header.Get("Content-Type"), body)
}

func TestGetReturnsStatusHeadersAndBody(t *testing.T) {
	_, port := server(t, http.HandlerFunc(echo))
	f := New(Options{Resolver: newStub("svc.test", "127.0.0.1")})
	res := mustCall(t, f, map[string]any{"url": "http://SVC.test:" + port + "/p/./q?a=%7e#frag"})
	wantBody := "method=GET uri=/p/q?a=~ host=svc.test:" + port + " ua=toolgate-fetch/1 x-echo= ct= body="
	if !strings.HasPrefix(res.Content, "HTTP 200 OK\n") {
		t.Fatalf("content does not start with the status line:\n%s", res.Content)
	}
	if !strings.Contains(res.Content, "\nContent-Type: text/plain; charset=utf-8\n") {
		t.Errorf("content lacks the Content-Type line:\n%s", res.Content)
	}
	if _, body, _ := strings.Cut(res.Content, "\n\n"); body != wantBody {
		t.Errorf("body = %q, want %q", body, wantBody)
	}
	if res.Data["status"] != 200 || res.Data["bytes"] != len(wantBody) || res.Data["truncated"] != false {
		t.Errorf("data = %v", res.Data)
	}
	if res.Truncated || res.Bytes != len(wantBody) {
		t.Errorf("result bytes/truncated = %d/%v", res.Bytes, res.Truncated)
	}
}

func TestPostSendsBodyAndHeaders(t *testing.T) {
	_, port := server(t, http.HandlerFunc(echo))
	f := New(Options{Resolver: newStub("svc.test", "127.0.0.1")})
	res := mustCall(t, f, map[string]any{
		"url": "http://svc.test:" + port + "/submit", "method": "POST", "body": `{"a":1}`,
		"headers": map[string]any{"x-echo": "hello", "Content-Type": "application/json", "User-Agent": "agent/2"},
	})
	want := `method=POST uri=/submit host=svc.test:` + port + ` ua=agent/2 x-echo=hello ct=application/json body={"a":1}`
	if _, body, _ := strings.Cut(res.Content, "\n\n"); body != want {
		t.Fatalf("body = %q, want %q", body, want)
	}
}

func TestNon2xxStatusIsAResult(t *testing.T) {
	_, port := server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", http.StatusNotFound)
	}))
	f := New(Options{Resolver: newStub("svc.test", "127.0.0.1")})
	res := mustCall(t, f, map[string]any{"url": "http://svc.test:" + port + "/missing"})
	if !strings.HasPrefix(res.Content, "HTTP 404 Not Found\n") || res.Data["status"] != 404 {
		t.Fatalf("content %q data %v", res.Content, res.Data)
	}
}

func TestEmptyBodyIsNamed(t *testing.T) {
	_, port := server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	f := New(Options{Resolver: newStub("svc.test", "127.0.0.1")})
	res := mustCall(t, f, map[string]any{"url": "http://svc.test:" + port + "/"})
	if !strings.HasPrefix(res.Content, "HTTP 204 No Content\n") || !strings.HasSuffix(res.Content, "\n\n[empty body]") {
		t.Fatalf("content %q", res.Content)
	}
}

func TestAtMost16HeaderLinesSortedAndCut(t *testing.T) {
	_, port := server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 19; i >= 0; i-- {
			w.Header().Add(fmt.Sprintf("X-H%02d", i), "v")
		}
		w.Header().Set("A-Long", strings.Repeat("x", 1000))
		w.Header()["Date"] = nil // keep the header set known
		fmt.Fprint(w, "ok")
	}))
	f := New(Options{Resolver: newStub("svc.test", "127.0.0.1")})
	res := mustCall(t, f, map[string]any{"url": "http://svc.test:" + port + "/"})
	lines := headerSection(res.Content)
	// 23 header lines: A-Long, Content-Length, Content-Type, X-H00..X-H19.
	if len(lines) != maxHeaderLines+1 || lines[maxHeaderLines] != "[7 more header lines not shown]" {
		t.Fatalf("header section:\n%s", strings.Join(lines, "\n"))
	}
	if !strings.HasPrefix(lines[0], "A-Long: xxx") || len(lines[0]) != maxHeaderLineLen || !strings.HasSuffix(lines[0], "…") {
		t.Errorf("first line not cut to %d bytes: %d %q", maxHeaderLineLen, len(lines[0]), lines[0])
	}
	if lines[1] != "Content-Length: 2" || lines[3] != "X-H00: v" || lines[15] != "X-H12: v" {
		t.Errorf("header lines not sorted by name:\n%s", strings.Join(lines, "\n"))
	}
	if _, body, _ := strings.Cut(res.Content, "\n\n"); body != "ok" {
		t.Errorf("body = %q", body)
	}
}

func TestBodyIsCappedWithANotice(t *testing.T) {
	big := strings.Repeat("a", 100<<10)
	_, port := server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(len(big)))
		fmt.Fprint(w, big)
	}))
	f := New(Options{Resolver: newStub("svc.test", "127.0.0.1")})
	u := "http://svc.test:" + port + "/big"

	t.Run("at the tool's own cap", func(t *testing.T) {
		res := mustCall(t, f, map[string]any{"url": u})
		if res.Data["truncated"] != true || res.Data["bytes"] != DefaultMaxBodyBytes || !res.Truncated {
			t.Fatalf("data = %v", res.Data)
		}
		notice := fmt.Sprintf("\n[truncated: showing the first %d bytes of the body of %d]", DefaultMaxBodyBytes, len(big))
		if !strings.HasSuffix(res.Content, notice) {
			t.Fatalf("content does not end with %q: ...%q", notice, res.Content[len(res.Content)-100:])
		}
		if len(res.Content) > f.Spec().Limits.MaxOutputBytes {
			t.Fatalf("content %d bytes over the limit", len(res.Content))
		}
	})
	t.Run("at a tighter call limit", func(t *testing.T) {
		plan := mustPrepare(t, f, map[string]any{"url": u})
		res, err := f.Run(context.Background(), env(), plan.Artifact, tools.Limits{MaxOutputBytes: 2000})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Content) > 2000 || !res.Truncated || !strings.Contains(res.Content, "[truncated: showing the first ") {
			t.Fatalf("%d bytes, truncated %v:\n%s", len(res.Content), res.Truncated, res.Content)
		}
	})
	t.Run("a cut inside a character is still text", func(t *testing.T) {
		_, port := server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "a"+strings.Repeat("é", 40<<10))
		}))
		res := mustCall(t, f, map[string]any{"url": "http://svc.test:" + port + "/"})
		if strings.Contains(res.Content, "[binary body") || !strings.Contains(res.Content, "[truncated: showing the first 65535 bytes") {
			t.Fatalf("content ends %q", res.Content[len(res.Content)-120:])
		}
	})
}

func TestBinaryBodyIsSummarized(t *testing.T) {
	_, port := server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream; x=1")
		w.Write([]byte{0x89, 'P', 'N', 'G', 0, 1, 0xff})
	}))
	f := New(Options{Resolver: newStub("svc.test", "127.0.0.1")})
	res := mustCall(t, f, map[string]any{"url": "http://svc.test:" + port + "/img"})
	if _, body, _ := strings.Cut(res.Content, "\n\n"); body != "[binary body: 7 bytes, content-type application/octet-stream]" {
		t.Fatalf("body = %q", body)
	}
	if res.Data["bytes"] != 7 {
		t.Fatalf("data = %v", res.Data)
	}
}

func TestSameOriginRedirectIsFollowedThroughThePinnedAddress(t *testing.T) {
	var port string
	_, port = server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/start":
			http.Redirect(w, r, "/middle", http.StatusFound)
		case "/middle":
			// Absolute, spelled differently, same origin.
			http.Redirect(w, r, "http://SVC.TEST.:"+port+"/final", http.StatusMovedPermanently)
		default:
			fmt.Fprint(w, "final body")
		}
	}))
	res := newStub("svc.test", "127.0.0.1")
	dr := &dialRecorder{}
	f := New(Options{Resolver: res, DialContext: dr.dial})
	plan := mustPrepare(t, f, map[string]any{"url": "http://svc.test:" + port + "/start"})
	res.set("svc.test", "127.0.0.2") // a later lookup would go elsewhere
	out, err := f.Run(context.Background(), env(), plan.Artifact, f.Spec().Limits)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.Content, "HTTP 200 OK\n") || !strings.HasSuffix(out.Content, "\n\nfinal body") {
		t.Fatalf("content:\n%s", out.Content)
	}
	for _, a := range dr.addrs() {
		if a != "127.0.0.1:"+port {
			t.Fatalf("dialed %s, want only the pinned 127.0.0.1:%s", a, port)
		}
	}
	if res.count() != 1 {
		t.Fatalf("resolver called %d times, want once", res.count())
	}
}

func TestRedirectToAnotherOriginIsReturnedNotFollowed(t *testing.T) {
	var otherHits atomic.Int32
	_, otherPort := server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		otherHits.Add(1)
		fmt.Fprint(w, "other")
	}))
	var port string
	_, port = server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/other-port":
			http.Redirect(w, r, "http://svc.test:"+otherPort+"/x", http.StatusFound)
		case "/other-host":
			http.Redirect(w, r, "http://alias.test:"+port+"/x", http.StatusFound)
		case "/other-scheme":
			http.Redirect(w, r, "https://svc.test:"+port+"/x", http.StatusTemporaryRedirect)
		case "/credentials":
			http.Redirect(w, r, "http://u:p@svc.test:"+port+"/x", http.StatusFound)
		}
	}))
	// alias.test resolves to the same address: origins are compared by name.
	f := New(Options{Resolver: newStub("svc.test", "127.0.0.1", "alias.test", "127.0.0.1")})
	tests := []struct{ path, status, location string }{
		{"/other-port", "HTTP 302 Found", "http://svc.test:" + otherPort + "/x"},
		{"/other-host", "HTTP 302 Found", "http://alias.test:" + port + "/x"},
		{"/other-scheme", "HTTP 307 Temporary Redirect", "https://svc.test:" + port + "/x"},
		{"/credentials", "HTTP 302 Found", "http://u:p@svc.test:" + port + "/x"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			res := mustCall(t, f, map[string]any{"url": "http://svc.test:" + port + tt.path})
			if !strings.HasPrefix(res.Content, tt.status+"\n") {
				t.Fatalf("content:\n%s", res.Content)
			}
			lines := headerSection(res.Content)
			n := len(lines)
			if n < 2 || !strings.HasPrefix(lines[n-2], "[redirect not followed: the location is another origin") ||
				lines[n-1] != "location: "+tt.location {
				t.Fatalf("header section lacks the redirect notice:\n%s", strings.Join(lines, "\n"))
			}
		})
	}
	if otherHits.Load() != 0 {
		t.Fatalf("the other origin was hit %d times", otherHits.Load())
	}
}

func TestRedirectsStopAfterFive(t *testing.T) {
	var hits atomic.Int32
	_, port := server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Redirect(w, r, "/loop", http.StatusFound)
	}))
	f := New(Options{Resolver: newStub("svc.test", "127.0.0.1")})
	res := mustCall(t, f, map[string]any{"url": "http://svc.test:" + port + "/loop"})
	if !strings.HasPrefix(res.Content, "HTTP 302 Found\n") || !strings.Contains(res.Content, "[redirect not followed: more than 5 redirects]\nlocation: http://svc.test:"+port+"/loop\n") {
		t.Fatalf("content:\n%s", res.Content)
	}
	if hits.Load() != 1+maxRedirects {
		t.Fatalf("server hit %d times, want %d", hits.Load(), 1+maxRedirects)
	}
}

func TestDNSChangeAfterPrepareDoesNotMoveTheDial(t *testing.T) {
	_, port := server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "pinned") }))
	res := newStub("svc.test", "127.0.0.1")
	dr := &dialRecorder{}
	f := New(Options{Resolver: res, DialContext: dr.dial})
	plan := mustPrepare(t, f, map[string]any{"url": "http://svc.test:" + port + "/"})
	res.set("svc.test", "127.0.0.2") // nothing listens there
	out, err := f.Run(context.Background(), env(), plan.Artifact, f.Spec().Limits)
	if err != nil {
		t.Fatalf("run dialed something else than the pinned address: %v", err)
	}
	if !strings.HasSuffix(out.Content, "\n\npinned") {
		t.Fatalf("content:\n%s", out.Content)
	}
	if got := dr.addrs(); len(got) != 1 || got[0] != "127.0.0.1:"+port {
		t.Fatalf("dialed %v", got)
	}
	if res.count() != 1 {
		t.Fatalf("resolver called %d times, want once", res.count())
	}
}

func TestPinnedAddressesAreTriedInOrder(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("127.0.0.2 not usable here: %v", err)
	}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "second") }))
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	t.Cleanup(ts.Close)
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	dr := &dialRecorder{refuse: map[string]bool{"127.0.0.1": true}}
	f := New(Options{Resolver: newStub("svc.test", "127.0.0.2,127.0.0.1"), DialContext: dr.dial})
	res := mustCall(t, f, map[string]any{"url": "http://svc.test:" + port + "/"})
	if !strings.HasSuffix(res.Content, "\n\nsecond") {
		t.Fatalf("content:\n%s", res.Content)
	}
	want := []string{"127.0.0.1:" + port, "127.0.0.2:" + port}
	if got := dr.addrs(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("dialed %v, want %v", got, want)
	}
}

func TestIPv6LoopbackLiteral(t *testing.T) {
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("::1 not usable here: %v", err)
	}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(echo))
	ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	t.Cleanup(ts.Close)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	f := New(Options{Resolver: newStub()})
	res := mustCall(t, f, map[string]any{"url": "http://[0:0::1]:" + port + "/v6"})
	if !strings.Contains(res.Content, "uri=/v6 host=[::1]:"+port+" ") {
		t.Fatalf("content:\n%s", res.Content)
	}
}

// Errors must name the method and host only.
func TestNetworkErrorsNameOnlyMethodAndHost(t *testing.T) {
	secretArgs := func(u string) map[string]any {
		return map[string]any{
			"url": u + "/secret-path/x?token=secret-query", "method": "POST", "body": "secret-body",
			"headers": map[string]any{"Authorization": "Bearer secret-header"},
		}
	}
	checkText := func(t *testing.T, err error, want string) {
		t.Helper()
		if err == nil {
			t.Fatal("run succeeded")
		}
		if err.Error() != want {
			t.Fatalf("error = %q, want %q", err.Error(), want)
		}
		if strings.Contains(err.Error(), "secret") || strings.Contains(fmt.Sprintf("%+v", err), "secret") {
			t.Fatalf("error leaks request detail: %q", err)
		}
		var me *tools.ModelError
		if errors.As(err, &me) {
			t.Fatalf("network failure must not be model feedback verbatim: %v", err)
		}
	}

	t.Run("server shut after prepare", func(t *testing.T) {
		ts, port := server(t, http.HandlerFunc(echo))
		res := newStub("svc.test", "127.0.0.1")
		f := New(Options{Resolver: res})
		plan := mustPrepare(t, f, secretArgs("http://svc.test:"+port))
		ts.Close()
		_, err := f.Run(context.Background(), env(), plan.Artifact, f.Spec().Limits)
		checkText(t, err, "fetch POST svc.test: connection refused")
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("error does not wrap ECONNREFUSED: %v", err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		release := make(chan struct{})
		_, port := server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}))
		defer close(release)
		f := New(Options{Resolver: newStub("svc.test", "127.0.0.1")})
		plan := mustPrepare(t, f, secretArgs("http://svc.test:"+port))
		// The server never answers; the caller's deadline ends the call.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := f.Run(ctx, env(), plan.Artifact, f.Spec().Limits)
		checkText(t, err, "fetch POST svc.test: timed out")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error does not wrap DeadlineExceeded: %v", err)
		}
	})
	t.Run("connection closed mid-response", func(t *testing.T) {
		_, port := server(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			conn.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort"))
			conn.Close()
		}))
		f := New(Options{Resolver: newStub("svc.test", "127.0.0.1")})
		_, err := call(t, f, secretArgs("http://svc.test:"+port))
		checkText(t, err, "fetch POST svc.test: connection closed by the server")
	})
	t.Run("certificate for another name", func(t *testing.T) {
		ts := tlsServer(t)
		u, _ := url.Parse(ts.URL)
		pool := x509.NewCertPool()
		pool.AddCert(ts.Certificate())
		f := New(Options{Resolver: newStub("wrong.test", "127.0.0.1"), RootCAs: pool})
		_, err := call(t, f, secretArgs("https://wrong.test:"+u.Port()))
		checkText(t, err, "fetch POST wrong.test: certificate verification failed")
	})
}

func TestTLSVerifiesTheCanonicalHost(t *testing.T) {
	// httptest's certificate names example.com, 127.0.0.1 and ::1.
	ts := tlsServer(t)
	u, _ := url.Parse(ts.URL)
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	f := New(Options{Resolver: newStub("example.com", "127.0.0.1"), RootCAs: pool})
	for _, target := range []string{"https://EXAMPLE.com.:" + u.Port() + "/tls", "https://127.0.0.1:" + u.Port() + "/tls"} {
		res := mustCall(t, f, map[string]any{"url": target})
		if !strings.HasPrefix(res.Content, "HTTP 200 OK\n") || !strings.Contains(res.Content, "uri=/tls ") {
			t.Fatalf("%s: content:\n%s", target, res.Content)
		}
	}
	// Without the test CA, the system pool refuses the certificate.
	plain := New(Options{Resolver: newStub("example.com", "127.0.0.1")})
	if _, err := call(t, plain, map[string]any{"url": "https://example.com:" + u.Port() + "/"}); err == nil ||
		err.Error() != "fetch GET example.com: certificate verification failed" {
		t.Fatalf("err = %v", err)
	}
}

func TestRunRefusesAForeignArtifact(t *testing.T) {
	f := New(Options{})
	if _, err := f.Run(context.Background(), env(), "http://127.0.0.1/", f.Spec().Limits); err == nil {
		t.Fatal("Run accepted an artifact it did not prepare")
	}
}

// tlsServer starts a loopback echo server with httptest's certificate,
// without logging the handshakes the tests make fail on purpose.
func tlsServer(t *testing.T) *httptest.Server {
	t.Helper()
	ts := httptest.NewUnstartedServer(http.HandlerFunc(echo))
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.StartTLS()
	t.Cleanup(ts.Close)
	return ts
}
