package mcptool

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// session returns the connected session, connecting when there is none.
func (u *Upstream) session(ctx context.Context) (*mcp.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return nil, errors.New("upstream closed")
	}
	if u.sess != nil {
		return u.sess, nil
	}
	var tr mcp.Transport
	var opts *mcp.ClientOptions
	if u.o.URL != "" {
		tr = u.callTransport()
	} else {
		p, err := startProcess(u.o)
		if err != nil {
			return nil, err
		}
		u.proc = p
		tr = &mcp.IOTransport{Reader: p.stdout, Writer: p.stdin, MaxLineLength: int(u.o.MaxResponseBytes + responseSlack)}
		// One process, one pipe: its notifications come on it.
		opts = &mcp.ClientOptions{ToolListChangedHandler: u.listChanged}
	}
	// The session is the gateway's, not the caller's who happens to open
	// it: its requests outside a call (initialize, a session's DELETE)
	// must not carry that call's assertion or token, so the context keeps
	// none of ctx's values, only its cancellation.
	cctx, cancel := context.WithTimeout(context.Background(), u.o.Timeout)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	client := newClient(opts)
	s, err := client.Connect(cctx, tr, nil)
	if err != nil {
		if u.proc != nil {
			u.proc.stop()
			u.proc = nil
		}
		return nil, fmt.Errorf("mcp upstream %s: connecting: %w", u.o.Namespace, err)
	}
	u.sess = s
	return s, nil
}

// callTransport is a streamable HTTP transport for requests and their
// answers only: every response answers one request, so each is bounded;
// notifications come over a session of their own (watch), whose end
// cannot break this one.
func (u *Upstream) callTransport() *mcp.StreamableClientTransport {
	return &mcp.StreamableClientTransport{
		Endpoint: u.o.URL, HTTPClient: u.hc, MaxRetries: -1,
		DisableStandaloneSSE: true,
		MaxEventSize:         int(u.o.MaxResponseBytes + responseSlack),
	}
}

// drop closes a session that failed, so that the next use reconnects.
func (u *Upstream) drop(s *mcp.ClientSession) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.sess != s {
		return
	}
	u.sess = nil
	s.Close()
	if u.proc != nil {
		u.proc.stop()
		u.proc = nil
	}
}

// Close ends the sessions and stops a stdio server.
func (u *Upstream) Close() error {
	u.mu.Lock()
	u.closed = true
	var open []*mcp.ClientSession
	if u.sess != nil {
		open = append(open, u.sess)
		u.sess = nil
	}
	for k, ss := range u.subs {
		open = append(open, ss.sess)
		delete(u.subs, k)
	}
	proc := u.proc
	u.proc = nil
	u.mu.Unlock()
	// Each close may wait for the upstream (a session's DELETE, bounded
	// by the SDK): all at once.
	var wg sync.WaitGroup
	for _, s := range open {
		wg.Go(func() { s.Close() })
	}
	wg.Wait()
	if proc != nil {
		proc.stop()
	}
	return nil
}
