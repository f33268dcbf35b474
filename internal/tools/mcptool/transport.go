package mcptool

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
)

// httpClient is a client through the upstream's connections that adds
// the headers, assertion and token of every request (assertingTransport);
// streamEnded, when set, is told when a notification stream ends.
func (u *Upstream) httpClient(streamEnded func()) *http.Client {
	return &http.Client{
		Transport: &assertingTransport{u: u, next: u.tr, streamEnded: streamEnded},
		// The configured URL is the only target.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// callKey carries the assertion claims of one call to the transport.
type callKey struct{}

// assertingTransport adds the configured headers, a fresh assertion and
// (with a token exchange) the upstream token to every request, and bounds
// every response body. Nothing of the caller's request reaches it: the
// only Authorization an upstream can see is one the operator configured in
// headers (the upstream's own credential) or the exchanged token.
type assertingTransport struct {
	u    *Upstream
	next http.RoundTripper
	// streamEnded, when set, is called once a notification stream's body
	// ends (see Upstream.watch).
	streamEnded func()
}

func (t *assertingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	fail := func(err error) (*http.Response, error) {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, err
	}
	stream := notificationStream(r) // as the SDK asked, before the operator's headers
	r = r.Clone(r.Context())
	for k, v := range t.u.o.Headers {
		r.Header.Set(k, v)
	}
	// Requests outside a call (initialize, tools/list, notifications)
	// assert the gateway itself: empty sub, tenant and call_id.
	claims, gateway := upstreamv1.Claims{Audience: t.u.o.Namespace}, true
	if c, ok := r.Context().Value(callKey{}).(*upstreamv1.Claims); ok {
		claims, gateway = *c, false
	}
	tok, err := t.u.o.Signer.Sign(claims)
	if err != nil {
		return fail(fmt.Errorf("signing the assertion: %w", err))
	}
	r.Header.Set(upstreamv1.AssertionHeader, tok)
	if t.u.exch != nil {
		// The assertion just signed is the subject token: the STS sees
		// exactly what the upstream sees. Without a token nothing is sent.
		access, err := t.u.exch.token(r.Context(), subjectOf(claims, gateway), tok)
		if err != nil {
			return fail(err)
		}
		r.Header.Set("Authorization", "Bearer "+access)
	}
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if stream {
		// A stream of notifications lives as long as the session: each
		// event is bounded (MaxEventSize), the stream is not.
		// Only a stream that opened can end; a refusal (405, an error)
		// leaves nothing to hear.
		if t.streamEnded != nil && resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			resp.Body = &endNotifier{ReadCloser: resp.Body, ended: t.streamEnded}
		}
		return resp, nil
	}
	resp.Body = &capped{r: resp.Body, left: t.u.o.MaxResponseBytes + responseSlack}
	return resp, nil
}

// notificationStream reports whether r opens a stream of server
// notifications: the standalone SSE stream of protocol versions before
// 2026-07-28 (GET) or a subscriptions/listen request.
func notificationStream(r *http.Request) bool {
	return r.Method == http.MethodGet || r.Header.Get("Mcp-Method") == "subscriptions/listen"
}

// endNotifier calls ended once its body fails, ends or is closed.
type endNotifier struct {
	io.ReadCloser
	ended func()
	once  sync.Once
}

func (b *endNotifier) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		b.once.Do(b.ended)
	}
	return n, err
}

func (b *endNotifier) Close() error {
	b.once.Do(b.ended)
	return b.ReadCloser.Close()
}

// errTooLarge: a response over the limit.
var errTooLarge = errors.New("response larger than the limit")

// capped fails a body past its limit.
type capped struct {
	r    io.ReadCloser
	left int64
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

func (c *capped) Close() error { return c.r.Close() }
