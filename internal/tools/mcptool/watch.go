package mcptool

import (
	"context"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ListChangedGap is the least time between two refreshes caused by
// notifications/tools/list_changed: the first of a burst refreshes at
// once, the rest of it are coalesced into one refresh after the gap.
const ListChangedGap = time.Second

// listChanged is the client's ToolListChangedHandler: it only signals Run
// (it runs on the session's reading goroutine and must not block).
func (u *Upstream) listChanged(context.Context, *mcp.ToolListChangedRequest) {
	select {
	case u.changed <- struct{}{}:
	default: // a refresh is already due
	}
}

// Run refreshes every interval, and soon after the upstream announces
// that its tool list changed (notifications/tools/list_changed: at most
// one refresh at a time, at most one per ListChangedGap), until ctx ends.
// Over streamable HTTP it keeps a session of its own open to hear those
// notifications (watch).
func (u *Upstream) Run(ctx context.Context, interval time.Duration) {
	var wg sync.WaitGroup
	defer wg.Wait()
	if u.o.URL != "" {
		wg.Go(func() { u.watch(ctx) })
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var last time.Time // the last refresh a notification caused
	refresh := func() {
		if err := u.Refresh(ctx); err != nil && ctx.Err() == nil {
			u.o.Logger.Warn("mcp upstream refresh failed", "upstream", u.o.Namespace, "err", err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			refresh()
		case <-u.changed:
			if wait := u.gap - time.Since(last); wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
			}
			last = time.Now()
			u.o.Logger.Debug("mcp upstream announced a changed tool list; refreshing", "upstream", u.o.Namespace)
			refresh()
		}
	}
}

// Backoff of the notification session.
const (
	watchMinBackoff = time.Second
	watchMaxBackoff = time.Minute
)

// watch keeps a session open to the HTTP upstream that only listens for
// notifications/tools/list_changed (the standalone SSE stream before
// protocol 2026-07-28, subscriptions/listen since), as the gateway itself.
// Once it listens it refreshes, since a change may have gone unheard
// before; when the stream ends it reconnects with backoff. An upstream
// that does not announce list changes is not watched (polling alone finds
// its drift).
func (u *Upstream) watch(ctx context.Context) {
	backoff := watchMinBackoff
	for {
		start := time.Now()
		if !u.watchOnce(ctx) || ctx.Err() != nil {
			return
		}
		if time.Since(start) > watchMaxBackoff {
			backoff = watchMinBackoff
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, watchMaxBackoff)
	}
}

// watchOnce runs one notification session until its stream ends or ctx
// does; keep is false when the upstream does not announce list changes.
func (u *Upstream) watchOnce(ctx context.Context) (keep bool) {
	u.mu.Lock()
	closed := u.closed
	u.mu.Unlock()
	if closed {
		return false
	}
	ended := make(chan struct{})
	var once sync.Once
	tr := &mcp.StreamableClientTransport{
		Endpoint: u.o.URL, MaxRetries: -1,
		HTTPClient:   u.httpClient(func() { once.Do(func() { close(ended) }) }),
		MaxEventSize: int(u.o.MaxResponseBytes + responseSlack),
	}
	client := newClient(&mcp.ClientOptions{ToolListChangedHandler: u.listChanged})
	// As the gateway itself: the connection keeps none of ctx's values.
	cctx, cancel := context.WithTimeout(context.Background(), u.o.Timeout)
	stop := context.AfterFunc(ctx, cancel)
	s, err := client.Connect(cctx, tr, nil)
	stop()
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			u.o.Logger.Warn("mcp upstream: cannot open the session that listens for tool list changes", "upstream", u.o.Namespace, "err", err)
		}
		return true
	}
	defer s.Close()
	if caps := s.InitializeResult().Capabilities; caps == nil || caps.Tools == nil || !caps.Tools.ListChanged {
		u.o.Logger.Info("mcp upstream does not announce tool list changes; drift is found by polling", "upstream", u.o.Namespace)
		return false
	}
	u.listChanged(ctx, nil)
	closedByPeer := make(chan struct{})
	go func() { s.Wait(); close(closedByPeer) }()
	select {
	case <-ctx.Done():
	case <-ended:
	case <-closedByPeer:
	}
	return true
}
