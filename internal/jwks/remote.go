package jwks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/go-json-experiment/json"
	"golang.org/x/time/rate"
)

// Defaults of RemoteOptions.
const (
	DefaultRefresh           = 5 * time.Minute
	DefaultUnknownKIDRefresh = 10 * time.Second
	// MaxDocumentBytes bounds a discovery document or key set.
	MaxDocumentBytes = 1 << 20
	fetchTimeout     = 10 * time.Second
	maxRedirects     = 5
)

// RemoteOptions configure NewRemote. Exactly one of URL and Issuer is set.
type RemoteOptions struct {
	// URL is the JWK Set's URL, fetched as given: the caller decides
	// whether it is one keys may be trusted from (gateway.yaml validation
	// requires https, or http on a loopback host).
	URL string
	// Issuer is an OpenID Connect issuer: the set's URL is the jwks_uri of
	// its discovery document, <Issuer>/.well-known/openid-configuration,
	// whose "issuer" must equal Issuer exactly (OpenID Connect Discovery
	// 1.0 §4.3). An https issuer's jwks_uri must be https too.
	Issuer string
	// Refresh is how often the set is fetched again; default
	// DefaultRefresh. A failed refresh keeps the keys fetched last.
	Refresh time.Duration
	// UnknownKIDRefresh is the shortest time between two fetches caused by
	// tokens naming a kid the set does not hold, and the longest wait
	// between attempts while the set has not loaded; default
	// DefaultUnknownKIDRefresh.
	UnknownKIDRefresh time.Duration
	// Client fetches; default a client with a 10 s timeout that follows at
	// most 5 redirects, never from https to http, and reads at most
	// MaxDocumentBytes of a body.
	Client *http.Client
	// Logger receives failed loads and refreshes; default none.
	Logger *slog.Logger
}

// NewRemote returns a set fetched from an identity provider. It returns at
// once: the first fetch runs in the background (Key waits for it), and
// while it fails it is retried, first after a second, then after twice as
// long each time up to UnknownKIDRefresh. Close stops it. Only options
// that cannot work are errors.
func NewRemote(o RemoteOptions) (*Set, error) {
	if (o.URL == "") == (o.Issuer == "") {
		return nil, errors.New("jwks: set exactly one of RemoteOptions.URL and RemoteOptions.Issuer")
	}
	for _, raw := range []string{o.URL, o.Issuer} {
		if raw == "" {
			continue
		}
		if u, err := url.Parse(raw); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			return nil, fmt.Errorf("jwks: %q is not an absolute http(s) URL", raw)
		}
	}
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	if o.UnknownKIDRefresh <= 0 {
		o.UnknownKIDRefresh = DefaultUnknownKIDRefresh
	}
	if o.Client == nil {
		o.Client = NewClient()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &Set{first: make(chan struct{}), stop: stop, done: make(chan struct{})}
	r := &remote{o: o, gate: gate{every: o.UnknownKIDRefresh}}
	go func() {
		defer close(s.done)
		r.load(ctx, s)
	}()
	return s, nil
}

type remote struct {
	o    RemoteOptions
	gate gate
}

// load fetches the set until it has usable keys, then installs it; the
// set's own refresh goroutine (jwkset's) keeps it fresh until ctx ends.
func (r *remote) load(ctx context.Context, s *Set) {
	var firstOnce sync.Once
	endFirst := func() { firstOnce.Do(func() { close(s.first) }) }
	defer endFirst()
	wait := time.Second
	for {
		src, where, err := r.fetch(ctx)
		if err == nil {
			s.src.Store(src)
			r.o.Logger.Info("identity provider keys loaded", "jwks_url", where)
			return
		}
		if ctx.Err() != nil {
			return
		}
		r.o.Logger.Error("identity provider keys did not load; tokens that need them are refused until they do",
			"err", err, "retry_in", wait.String())
		endFirst()
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, r.o.UnknownKIDRefresh)
	}
}

// fetch discovers the set's URL when needed and fetches the set once. On
// success the returned source's storage refreshes itself until ctx ends.
func (r *remote) fetch(ctx context.Context) (*source, string, error) {
	where := r.o.URL
	if r.o.Issuer != "" {
		var err error
		if where, err = discover(ctx, r.o.Client, r.o.Issuer); err != nil {
			return nil, "", err
		}
	}
	sctx, cancel := context.WithCancel(ctx)
	store, err := jwkset.NewStorageFromHTTP(where, jwkset.HTTPClientStorageOptions{
		Client:                    r.o.Client,
		Ctx:                       sctx,
		HTTPTimeout:               fetchTimeout,
		NoErrorReturnFirstHTTPReq: false,
		RefreshInterval:           r.o.Refresh,
		RefreshErrorHandler: func(_ context.Context, err error) {
			r.o.Logger.Warn("refreshing the identity provider's keys failed; the keys fetched last stay in use",
				"jwks_url", where, "err", err)
		},
	})
	if err != nil {
		cancel()
		return nil, "", fmt.Errorf("fetching the key set %s: %w", where, err)
	}
	keys, err := usableKeys(ctx, store)
	if err == nil && len(keys) == 0 {
		err = errors.New("it holds no usable signature verification key")
	}
	if err != nil {
		cancel()
		return nil, "", fmt.Errorf("the key set %s: %w", where, err)
	}
	// jwkset refreshes a set whose kid is unknown when its HTTP client is
	// asked for that kid; its own rate limiter makes callers Wait, which
	// would park one goroutine per garbage token. An unlimited limiter
	// leaves the decision to the gate, which never queues.
	refresher, err := jwkset.NewHTTPClient(jwkset.HTTPClientOptions{
		HTTPURLs:          map[string]jwkset.Storage{where: store},
		RefreshUnknownKID: rate.NewLimiter(rate.Inf, 1),
	})
	if err != nil {
		cancel()
		return nil, "", err
	}
	src, err := newSource(store, gated{Storage: store, refresher: refresher, gate: &r.gate})
	if err != nil {
		cancel()
		return nil, "", err
	}
	src.stop = cancel // also ended with ctx, by Close
	return src, where, nil
}

// discover reads an OpenID Connect discovery document and returns its
// jwks_uri.
func discover(ctx context.Context, client *http.Client, issuer string) (string, error) {
	where := strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, where, nil)
	if err != nil {
		return "", fmt.Errorf("discovery: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("discovery: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("discovery: %s answered %s", where, resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("discovery: %s: %w", where, err)
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", fmt.Errorf("discovery: %s is not a discovery document: %w", where, err)
	}
	if doc.Issuer != issuer {
		return "", fmt.Errorf("discovery: %s names the issuer %q, not the configured %q; refusing its keys", where, doc.Issuer, issuer)
	}
	ju, err := url.Parse(doc.JWKSURI)
	if err != nil || doc.JWKSURI == "" || ju.Host == "" || (ju.Scheme != "https" && ju.Scheme != "http") || ju.User != nil {
		return "", fmt.Errorf("discovery: %s has no usable jwks_uri (%q)", where, doc.JWKSURI)
	}
	iu, _ := url.Parse(issuer)
	if ju.Scheme == "http" && (iu.Scheme != "http" || !loopback(ju.Hostname())) {
		return "", fmt.Errorf("discovery: %s names a plain http jwks_uri (%q); keys must come over https", where, doc.JWKSURI)
	}
	return doc.JWKSURI, nil
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// NewClient returns the HTTP client remote sets use by default: a 10 s
// timeout, at most 5 redirects and never from https to http, and bodies
// cut off (with an error) after MaxDocumentBytes.
func NewClient() *http.Client {
	return &http.Client{
		Timeout:   fetchTimeout,
		Transport: limitBodies{http.DefaultTransport},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return fmt.Errorf("more than %d redirects", maxRedirects)
			}
			if via[0].URL.Scheme == "https" && req.URL.Scheme != "https" {
				return errors.New("redirect from https to plain http refused")
			}
			return nil
		},
	}
}

// limitBodies fails a response body that is longer than MaxDocumentBytes,
// so that a provider (or whoever answers in its name) cannot make the
// gateway buffer without end.
type limitBodies struct{ next http.RoundTripper }

func (l limitBodies) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{r: resp.Body, left: MaxDocumentBytes}
	return resp, nil
}

type limitedBody struct {
	r    io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One more byte tells a body of exactly the limit from a longer one.
		var one [1]byte
		n, err := b.r.Read(one[:])
		if n > 0 {
			return 0, fmt.Errorf("response body longer than %d bytes", MaxDocumentBytes)
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *limitedBody) Close() error { return b.r.Close() }

// gated reads keys without fetching; a kid it does not hold fetches the
// set again when the gate allows it.
type gated struct {
	jwkset.Storage
	refresher jwkset.Storage // jwkset's HTTP client over the same storage
	gate      *gate
}

func (g gated) KeyRead(ctx context.Context, kid string) (jwkset.JWK, error) {
	j, err := g.Storage.KeyRead(ctx, kid)
	if !errors.Is(err, jwkset.ErrKeyNotFound) {
		return j, err
	}
	switch g.gate.enter(ctx) {
	case gateRun:
		defer g.gate.leave()
		// A caller that hangs up does not cut the fetch short for the
		// callers waiting on it.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
		defer cancel()
		return g.refresher.KeyRead(fctx, kid)
	case gateWaited:
		return g.Storage.KeyRead(ctx, kid)
	default:
		return j, err
	}
}

// gate allows one fetch for unknown kids per interval. Callers that arrive
// while that fetch runs wait for it (their context allowing); callers that
// arrive later within the interval are refused at once: nobody queues
// behind a rate limiter, so a flood of garbage kids costs the provider one
// fetch per interval and the gateway nothing that waits.
type gate struct {
	every time.Duration

	mu      sync.Mutex
	last    time.Time     // when the last fetch started; zero: never
	running chan struct{} // closed when the running fetch ends; nil: none
}

type gateVerdict int

const (
	gateRefused gateVerdict = iota
	gateRun
	gateWaited
)

func (g *gate) enter(ctx context.Context) gateVerdict {
	g.mu.Lock()
	if ch := g.running; ch != nil {
		g.mu.Unlock()
		select {
		case <-ch:
			return gateWaited
		case <-ctx.Done():
			return gateRefused
		}
	}
	now := time.Now()
	if !g.last.IsZero() && now.Sub(g.last) < g.every {
		g.mu.Unlock()
		return gateRefused
	}
	g.last = now
	g.running = make(chan struct{})
	g.mu.Unlock()
	return gateRun
}

func (g *gate) leave() {
	g.mu.Lock()
	close(g.running)
	g.running = nil
	g.mu.Unlock()
}
