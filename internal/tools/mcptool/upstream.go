package mcptool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
	"github.com/toolgate/toolgate/internal/tools"
)

// Limits on what one upstream may publish.
const (
	// MaxTools bounds the tools of one upstream; a longer list is
	// truncated (and logged).
	MaxTools = 1024
	// MaxToolErrorBytes caps the text of an isError result shown to the
	// model.
	MaxToolErrorBytes = upstreamv1.MaxToolErrorBytes
	// responseSlack is what a response may carry beyond the configured
	// result limit (the JSON-RPC envelope).
	responseSlack = 64 << 10
)

// Signer signs the identity assertion of a request.
type Signer interface {
	Sign(upstreamv1.Claims) (string, error)
}

// Options configure an Upstream.
type Options struct {
	Namespace string // tools.mcp[].name
	// URL is the streamable HTTP endpoint; Command (absolute program
	// first) starts a stdio server through Confine, which must put it in
	// the command jail. Exactly one of the two.
	URL     string
	Headers map[string]string
	Command []string
	// Confine rewrites the command before it starts (the command jail)
	// and returns a release function to call once it started. A stdio
	// upstream without Confine is refused: it never runs unconfined.
	Confine          func(*exec.Cmd) (release func(), err error)
	Dir              string // the stdio server's working folder
	Timeout          time.Duration
	MaxConcurrent    int
	MaxResponseBytes int64
	MaxOutputBytes   int
	// Allow, when not nil, is the set of upstream tool names offered.
	Allow map[string]bool
	// Pins are the approved digests by upstream tool name; nil with
	// Pinned false offers every tool as discovered.
	Pins   map[string]string
	Pinned bool
	// PolicyPins, when set, returns more approved digests by upstream
	// tool name: those the current policy revision's data holds
	// (data.toolgate.mcp_pins). A definition is approved when it matches
	// its pin in Pins or in PolicyPins.
	PolicyPins func(context.Context) map[string]string
	// Resources maps an upstream tool name to its resource declarations.
	Resources map[string][]map[string]string
	Signer    Signer
	// TokenExchange, when set (URL only), sends the upstream the token an
	// RFC 8693 exchange of each request's assertion gives (see
	// TokenExchange), cached per tenant, principal and roles.
	TokenExchange *TokenExchange
	// OnDrift is told of every definition that is not offered because it
	// differs from its pin, has none, or vanished; once per tool and
	// current digest.
	OnDrift func(Drift)
	Logger  *slog.Logger
}

// Drift kinds.
const (
	DriftChanged  = "drifted"  // the definition's digest differs from its pin
	DriftUnpinned = "unpinned" // a tool without a pin
	DriftRemoved  = "removed"  // an offered tool the upstream no longer lists
	DriftInvalid  = "invalid"  // a definition that cannot be offered (bad schema, name collision)
)

// Drift reports one tool that is not offered because of its definition.
type Drift struct {
	Upstream      string // namespace
	Tool          string // the upstream's tool name
	GatewayTool   string // "<namespace>-<tool>" normalized ("" when invalid)
	Kind          string // DriftChanged, DriftUnpinned, DriftRemoved, DriftInvalid
	PinnedDigest  string // "" when unpinned
	CurrentDigest string // "" when removed
	Detail        string // why, for logs and audit
}

// Upstream is one MCP server. It is safe for concurrent use.
type Upstream struct {
	o     Options
	sem   chan struct{}
	tr    http.RoundTripper // the HTTP connections (URL only)
	hc    *http.Client
	exch  *exchanger       // nil without a token exchange
	tools map[string]*Tool // by upstream tool name: the ones offered at start
	// changed is signalled (never blocking) when the upstream says its
	// tool list changed; Run refreshes, at most once a gap.
	changed chan struct{}
	gap     time.Duration

	mu       sync.Mutex
	sess     *mcp.ClientSession
	proc     *process
	subs     map[subject]*subjectSession // with a token exchange: calls' sessions
	reported map[string]string           // tool -> digest last reported as drift
	// reports and suppressed count the drifts of the current listing.
	reports, suppressed int
	closed              bool
}

// New checks o and returns an unconnected upstream.
func New(o Options) (*Upstream, error) {
	if (o.URL == "") == (len(o.Command) == 0) {
		return nil, fmt.Errorf("mcp upstream %s: needs exactly one of url and command", o.Namespace)
	}
	if len(o.Command) > 0 && o.Confine == nil {
		return nil, fmt.Errorf("mcp upstream %s: a stdio server runs only in the command jail", o.Namespace)
	}
	if o.Signer == nil {
		return nil, fmt.Errorf("mcp upstream %s: no assertion signer", o.Namespace)
	}
	if o.Timeout <= 0 || o.MaxConcurrent <= 0 || o.MaxResponseBytes <= 0 {
		return nil, fmt.Errorf("mcp upstream %s: timeout, concurrency and response limit must be positive", o.Namespace)
	}
	if o.TokenExchange != nil && o.URL == "" {
		return nil, fmt.Errorf("mcp upstream %s: token exchange needs a url upstream", o.Namespace)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	u := &Upstream{o: o, sem: make(chan struct{}, o.MaxConcurrent), tools: map[string]*Tool{}, reported: map[string]string{},
		changed: make(chan struct{}, 1), gap: ListChangedGap, subs: map[subject]*subjectSession{}}
	if o.TokenExchange != nil {
		x, err := newExchanger(*o.TokenExchange, o.Namespace, o.Timeout, o.Logger)
		if err != nil {
			return nil, fmt.Errorf("mcp upstream %s: %w", o.Namespace, err)
		}
		u.exch = x
	}
	if o.URL != "" {
		tr := &http.Transport{
			Proxy:                  nil, // the configured endpoint is the peer
			DialContext:            (&net.Dialer{Timeout: o.Timeout, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:      true,
			MaxIdleConnsPerHost:    o.MaxConcurrent,
			IdleConnTimeout:        90 * time.Second,
			TLSHandshakeTimeout:    o.Timeout,
			MaxResponseHeaderBytes: 64 << 10,
		}
		u.tr = tr
		u.hc = u.httpClient(nil)
	}
	return u, nil
}

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

// Namespace is the upstream's configured name.
func (u *Upstream) Namespace() string { return u.o.Namespace }

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

// List returns the definitions the upstream publishes now, in its order
// (at most MaxTools). Definitions that cannot be read are returned with an
// empty Digest and their error in the map.
func (u *Upstream) List(ctx context.Context) ([]Definition, map[string]error, error) {
	s, err := u.session(ctx)
	if err != nil {
		return nil, nil, err
	}
	lctx, cancel := context.WithTimeout(ctx, u.o.Timeout)
	defer cancel()
	var defs []Definition
	bad := map[string]error{}
	for t, err := range s.Tools(lctx, nil) {
		if err != nil {
			u.drop(s)
			return nil, nil, fmt.Errorf("mcp upstream %s: tools/list: %w", u.o.Namespace, err)
		}
		if len(defs) >= MaxTools {
			u.o.Logger.Warn("mcp upstream lists too many tools; the rest are ignored", "upstream", u.o.Namespace, "max", MaxTools)
			break
		}
		d, err := DefinitionOf(t)
		if err != nil {
			bad[t.Name] = err
			d = Definition{Name: t.Name}
		}
		defs = append(defs, d)
	}
	return defs, bad, nil
}

// Discover lists the upstream's tools and builds the ones to offer: in
// the allow-list (when set), with a valid and unique gateway name, a
// schema that compiles, and (when pinned) the pinned digest. Everything
// else is reported through OnDrift. It is called once, at start.
func (u *Upstream) Discover(ctx context.Context) ([]*Tool, error) {
	defs, bad, err := u.List(ctx)
	if err != nil {
		return nil, err
	}
	u.beginReports()
	defer u.endReports(defs)
	policy := u.policyPins(ctx)
	// Names that occur twice, or collide once normalized, offer none of
	// their claimants: the upstream's list is ambiguous.
	byGateway := map[string]int{}
	byName := map[string]int{}
	for _, d := range defs {
		byName[d.Name]++
		byGateway[Normalize(u.o.Namespace, d.Name)]++
	}
	var out []*Tool
	for _, d := range defs {
		if u.o.Allow != nil && !u.o.Allow[d.Name] {
			continue
		}
		gw := Normalize(u.o.Namespace, d.Name)
		invalid := func(detail string) {
			u.report(Drift{Upstream: u.o.Namespace, Tool: d.Name, GatewayTool: gw, Kind: DriftInvalid,
				PinnedDigest: u.o.Pins[d.Name], CurrentDigest: d.Digest, Detail: detail})
		}
		switch {
		case bad[d.Name] != nil:
			invalid(bad[d.Name].Error())
			continue
		case byName[d.Name] > 1:
			invalid("the upstream lists this tool name more than once")
			continue
		case !tools.ValidName(gw):
			invalid("the tool's name does not make a valid gateway tool name")
			continue
		case byGateway[gw] > 1:
			invalid("the tool's name collides with another of the upstream's tools once normalized to " + gw)
			continue
		}
		if u.o.Pinned {
			if ok, pin := u.approved(policy, d.Name, d.Digest); !ok {
				if pin == "" {
					u.report(Drift{Upstream: u.o.Namespace, Tool: d.Name, GatewayTool: gw, Kind: DriftUnpinned, CurrentDigest: d.Digest,
						Detail: "no pin in mcp.lock.json or the policy's data"})
				} else {
					u.report(Drift{Upstream: u.o.Namespace, Tool: d.Name, GatewayTool: gw, Kind: DriftChanged, PinnedDigest: pin, CurrentDigest: d.Digest,
						Detail: "the definition differs from its pin"})
				}
				continue
			}
		}
		t, err := newTool(u, gw, d)
		if err != nil {
			invalid(err.Error())
			continue
		}
		u.tools[d.Name] = t
		out = append(out, t)
	}
	return out, nil
}

// OfferPinned is Discover for an upstream that cannot be listed at start:
// it builds the tools pinned in the lock (pins, by upstream tool name) from
// their pinned definitions, each withheld with reason until a listing shows
// the upstream offers exactly that definition (Refresh). A pin whose
// definition does not hash to its digest, or that could not be offered
// (name, schema), is skipped.
func (u *Upstream) OfferPinned(pins map[string]*Pin, reason string) []*Tool {
	var out []*Tool
	seen := map[string]bool{}
	for _, name := range sortedNames(pins) {
		p := pins[name]
		if u.o.Allow != nil && !u.o.Allow[name] {
			continue
		}
		d := Definition{Name: name, Description: p.Description, InputSchema: p.InputSchema, Annotations: p.Annotations}
		gw := Normalize(u.o.Namespace, name)
		if d.seal() != nil || d.Digest != p.Digest || d.InputSchema == nil || !tools.ValidName(gw) || seen[gw] {
			u.o.Logger.Warn("mcp pin not offered: its definition does not match its digest or cannot be offered", "upstream", u.o.Namespace, "tool", name)
			continue
		}
		t, err := newTool(u, gw, d)
		if err != nil {
			u.o.Logger.Warn("mcp pin not offered", "upstream", u.o.Namespace, "tool", name, "err", err)
			continue
		}
		seen[gw] = true
		t.withhold(reason)
		u.tools[name] = t
		out = append(out, t)
	}
	return out
}

// Refresh lists the tools again. An offered tool whose definition no
// longer matches the one it was offered with (its pin, or with pinning off
// the definition at start), or that vanished, is withheld until it matches
// again; new tools are reported (they are offered only after pinning and a
// restart). A failed listing withholds nothing: calls fail on their own.
func (u *Upstream) Refresh(ctx context.Context) error {
	defs, _, err := u.List(ctx)
	if err != nil {
		return err
	}
	u.beginReports()
	defer u.endReports(defs)
	policy := u.policyPins(ctx)
	seen := map[string]Definition{}
	count := map[string]int{}
	for _, d := range defs {
		count[d.Name]++
		seen[d.Name] = d
	}
	for name, t := range u.tools {
		d, ok := seen[name]
		switch {
		case !ok:
			t.withhold("the upstream no longer lists the tool")
			u.report(Drift{Upstream: u.o.Namespace, Tool: name, GatewayTool: t.spec.Name, Kind: DriftRemoved, PinnedDigest: t.spec.DefinitionDigest,
				Detail: "the upstream no longer lists the tool"})
		case count[name] > 1:
			t.withhold("the upstream lists the tool more than once")
			u.report(Drift{Upstream: u.o.Namespace, Tool: name, GatewayTool: t.spec.Name, Kind: DriftInvalid, PinnedDigest: t.spec.DefinitionDigest,
				CurrentDigest: d.Digest, Detail: "the upstream lists this tool name more than once"})
		case d.Digest != t.spec.DefinitionDigest:
			t.withhold("the tool's definition drifted from its pin")
			u.report(Drift{Upstream: u.o.Namespace, Tool: name, GatewayTool: t.spec.Name, Kind: DriftChanged, PinnedDigest: t.spec.DefinitionDigest,
				CurrentDigest: d.Digest, Detail: "the definition differs from its pin"})
		case u.o.Pinned && !approvedNow(u, policy, name, d.Digest):
			t.withhold("the tool's definition is no longer pinned")
			u.report(Drift{Upstream: u.o.Namespace, Tool: name, GatewayTool: t.spec.Name, Kind: DriftUnpinned,
				CurrentDigest: d.Digest, Detail: "the pin that approved the definition was withdrawn"})
		default:
			if t.withhold("") {
				u.o.Logger.Info("mcp tool matches its pin again; offered", "tool", t.spec.Name)
			}
			u.mu.Lock()
			delete(u.reported, name)
			u.mu.Unlock()
		}
	}
	for _, d := range defs {
		if _, offered := u.tools[d.Name]; offered || (u.o.Allow != nil && !u.o.Allow[d.Name]) {
			continue
		}
		kind, detail := DriftUnpinned, "a new tool (pin it and restart to offer it)"
		ok, pin := u.approved(policy, d.Name, d.Digest)
		if !ok && pin != "" {
			kind, detail = DriftChanged, "the definition differs from its pin"
		} else if ok || !u.o.Pinned {
			detail = "a tool not offered at start (restart to offer it)"
		}
		u.report(Drift{Upstream: u.o.Namespace, Tool: d.Name, GatewayTool: Normalize(u.o.Namespace, d.Name), Kind: kind,
			PinnedDigest: pin, CurrentDigest: d.Digest, Detail: detail})
	}
	return nil
}

func (u *Upstream) beginReports() {
	u.mu.Lock()
	u.reports, u.suppressed = 0, 0
	u.mu.Unlock()
}

// endReports sums up the drifts not reported one by one, and forgets
// tools the upstream no longer lists (unless offered), so the memory of
// what was reported stays bounded by one listing.
func (u *Upstream) endReports(defs []Definition) {
	listed := make(map[string]bool, len(defs))
	for _, d := range defs {
		listed[d.Name] = true
	}
	u.mu.Lock()
	for name := range u.reported {
		if _, offered := u.tools[name]; !offered && !listed[name] {
			delete(u.reported, name)
		}
	}
	n := u.suppressed
	u.mu.Unlock()
	if n == 0 {
		return
	}
	d := Drift{Upstream: u.o.Namespace, Kind: DriftInvalid,
		Detail: fmt.Sprintf("%d more tool definitions not offered (not recorded one by one)", n)}
	u.o.Logger.Warn("mcp tool definitions not offered", "upstream", d.Upstream, "more", n)
	if u.o.OnDrift != nil {
		u.o.OnDrift(d)
	}
}

// policyPins are the current policy's pins of this upstream (nil without).
func (u *Upstream) policyPins(ctx context.Context) map[string]string {
	if u.o.PolicyPins == nil {
		return nil
	}
	return u.o.PolicyPins(ctx)
}

// approved reports whether digest is the pinned definition of tool, in
// the lock or in the policy's pins; pin is a pin it differs from ("" when
// the tool has none).
func (u *Upstream) approved(policy map[string]string, tool, digest string) (ok bool, pin string) {
	lock, inLock := u.o.Pins[tool]
	pol, inPolicy := policy[tool]
	if inLock && lock == digest || inPolicy && pol == digest {
		return true, digest
	}
	if inLock {
		return false, lock
	}
	return false, pol
}

func approvedNow(u *Upstream, policy map[string]string, tool, digest string) bool {
	ok, _ := u.approved(policy, tool, digest)
	return ok
}

// MaxDriftReports bounds the drifts recorded one by one per listing, so
// that an upstream inventing tool names cannot flood the audit log; the
// rest are summed up in one more report.
const MaxDriftReports = 32

// report passes a drift on once per tool and current digest, at most
// MaxDriftReports per listing.
func (u *Upstream) report(d Drift) {
	u.mu.Lock()
	key := d.Kind + "\x00" + d.CurrentDigest
	if u.reported[d.Tool] == key {
		u.mu.Unlock()
		return
	}
	u.reported[d.Tool] = key
	u.reports++
	if u.reports > MaxDriftReports {
		u.suppressed++
		u.mu.Unlock()
		return
	}
	u.mu.Unlock()
	u.o.Logger.Warn("mcp tool definition not offered", "upstream", d.Upstream, "tool", d.Tool, "kind", d.Kind,
		"pinned_digest", d.PinnedDigest, "current_digest", d.CurrentDigest, "detail", d.Detail)
	if u.o.OnDrift != nil {
		u.o.OnDrift(d)
	}
}

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

// withheldState is a tool's current reason not to be offered.
type withheldState = atomic.Pointer[string]
