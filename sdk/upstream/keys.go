package upstream

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
)

// Limits of fetching the gateway's key set.
const (
	// MaxJWKSBytes bounds a fetched key set; a longer one is a failed
	// fetch.
	MaxJWKSBytes = 1 << 20
	fetchTimeout = 10 * time.Second
	maxRedirects = 5
)

// Errors of keySet.key; Verify wraps them in ErrInvalidAssertion.
var (
	errNotLoaded  = errors.New("the gateway's keys are not loaded")
	errUnknownKey = errors.New("no key for the assertion's kid")
)

// keys is a set of Ed25519 verification keys by kid ("" for a key
// without one).
type keys map[string]ed25519.PublicKey

// parseKeys reads a JWK Set. Keys meant only for encryption ("use":
// "enc", or key_ops without "verify") and keys of other types or curves
// are left out: the gateway signs with Ed25519 only. Private or symmetric
// key material ("d", "k"), an Ed25519 key that does not decode or pins
// another "alg", duplicate kids and a set without an Ed25519 verification
// key are errors.
func parseKeys(data []byte) (keys, error) {
	var doc struct {
		Keys []jsontext.Value `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	out := keys{}
	for i, raw := range doc.Keys {
		var j struct {
			upstreamv1.JWK
			KeyOps []string `json:"key_ops"`
			D      string   `json:"d"`
			K      string   `json:"k"`
		}
		if err := json.Unmarshal(raw, &j); err != nil {
			return nil, fmt.Errorf("keys[%d]: %w", i, err)
		}
		if j.D != "" || j.K != "" {
			return nil, fmt.Errorf("keys[%d]: contains private or symmetric key material; publish only public keys", i)
		}
		if j.Use == "enc" || (len(j.KeyOps) > 0 && !slices.Contains(j.KeyOps, "verify")) {
			continue
		}
		pub, err := j.PublicKey()
		if errors.Is(err, upstreamv1.ErrNotEd25519) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("keys[%d]: %w", i, err)
		}
		if _, dup := out[j.Kid]; dup {
			if j.Kid == "" {
				return nil, fmt.Errorf("keys[%d]: a second key without kid: give every key of a set of several a kid", i)
			}
			return nil, fmt.Errorf("keys[%d]: duplicate kid %q", i, j.Kid)
		}
		out[j.Kid] = pub
	}
	if len(out) == 0 {
		return nil, errors.New("no Ed25519 signature verification key")
	}
	return out, nil
}

// keySet holds the keys a Verifier trusts: a fixed set, or one fetched
// from the gateway and kept fresh. It is safe for concurrent use.
type keySet struct {
	cur   atomic.Pointer[keys] // nil until a remote set has loaded
	first chan struct{}        // closed when the first fetch attempt has ended

	// A remote set's.
	url     string
	client  *http.Client
	refresh time.Duration
	gate    gate
	retry   time.Duration   // the first wait after a failed first fetch
	ctx     context.Context // ended by Close
	stop    context.CancelFunc
	done    chan struct{}
	once    sync.Once

	waiting func() // tests: called when key starts waiting for the first fetch
}

// firstRetry is how long a failed first fetch waits before the next try.
var firstRetry = time.Second

// staticKeys returns a fixed set of the keys in a JWK Set document.
func staticKeys(data []byte) (*keySet, error) {
	k, err := parseKeys(data)
	if err != nil {
		return nil, err
	}
	s := &keySet{first: make(chan struct{})}
	close(s.first)
	s.cur.Store(&k)
	return s, nil
}

// remoteKeys returns a set fetched from rawURL. It returns at once: the
// first fetch runs in the background (key waits for it), and while it
// fails it is retried, first after a second, then after twice as long
// each time up to unknown. Once loaded, the set is fetched again every
// refresh (a failed refresh keeps the keys fetched last), and when an
// assertion names a kid the set does not hold (at most once per
// unknown). Close stops it.
func remoteKeys(rawURL string, client *http.Client, refresh, unknown time.Duration) (*keySet, error) {
	if u, err := url.Parse(rawURL); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, fmt.Errorf("JWKSURL %q is not an absolute http(s) URL", rawURL)
	}
	if client == nil {
		client = newClient()
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &keySet{
		first: make(chan struct{}), url: rawURL, client: client, refresh: refresh,
		gate: gate{every: unknown}, retry: firstRetry, ctx: ctx, stop: stop, done: make(chan struct{}),
	}
	go s.run(ctx)
	return s, nil
}

// run fetches the set until it has loaded, then every refresh, until ctx
// ends.
func (s *keySet) run(ctx context.Context) {
	defer close(s.done)
	var firstOnce sync.Once
	endFirst := func() { firstOnce.Do(func() { close(s.first) }) }
	defer endFirst()
	wait := s.retry
	for s.cur.Load() == nil {
		err := s.fetch(ctx)
		endFirst()
		if err == nil || ctx.Err() != nil {
			break
		}
		// An assertion with a kid may load the set before the retry does.
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, s.gate.every)
	}
	t := time.NewTicker(s.refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.fetch(ctx) // a failure keeps the keys fetched last
		}
	}
}

// fetch gets the set once and installs it.
func (s *keySet) fetch(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the key set %s answered %s", s.url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxJWKSBytes+1))
	if err != nil {
		return fmt.Errorf("the key set %s: %w", s.url, err)
	}
	if len(body) > MaxJWKSBytes {
		return fmt.Errorf("the key set %s is longer than %d bytes", s.url, MaxJWKSBytes)
	}
	k, err := parseKeys(body)
	if err != nil {
		return fmt.Errorf("the key set %s: %w", s.url, err)
	}
	s.cur.Store(&k)
	return nil
}

// key returns the key for an assertion naming kid (named false: it names
// none). An assertion without kid is verified only when the set holds
// exactly one key, so the choice is never ambiguous. A kid the set does
// not hold — or any kid while a remote set has not loaded, as when the
// gateway was down when the service started — fetches the set at once,
// at most once per UnknownKeyRefetch; assertions arriving during that
// fetch wait for it.
func (s *keySet) key(ctx context.Context, kid string, named bool) (ed25519.PublicKey, error) {
	if s.cur.Load() == nil {
		if s.waiting != nil {
			s.waiting()
		}
		select {
		case <-s.first:
		case <-ctx.Done():
		}
	}
	k := s.cur.Load()
	if !named {
		if k == nil {
			return nil, errNotLoaded
		}
		if len(*k) != 1 {
			return nil, fmt.Errorf("%w: the assertion names no kid and the set holds %d keys", errUnknownKey, len(*k))
		}
		for _, pub := range *k {
			return pub, nil
		}
	}
	if k != nil {
		if pub, ok := (*k)[kid]; ok {
			return pub, nil
		}
	}
	if s.stop != nil && s.ctx.Err() == nil { // Close ends fetching
		switch s.gate.enter(ctx) {
		case gateRun:
			// A caller that hangs up does not cut the fetch short for the
			// callers waiting on it.
			s.fetch(context.WithoutCancel(ctx))
			s.gate.leave()
		case gateWaited:
		}
		if k = s.cur.Load(); k != nil {
			if pub, ok := (*k)[kid]; ok {
				return pub, nil
			}
		}
	}
	if k == nil {
		return nil, errNotLoaded
	}
	return nil, fmt.Errorf("%w %q", errUnknownKey, kid)
}

// Close stops a remote set's fetching. Keys already loaded stay usable.
// It is safe to call more than once, and on a fixed set.
func (s *keySet) Close() {
	if s.stop == nil {
		return
	}
	s.once.Do(func() {
		s.stop()
		<-s.done
	})
}

// newClient returns the client a JWKSURL is fetched with by default: a
// 10 s timeout, at most 5 redirects and never from https to http.
func newClient() *http.Client {
	return &http.Client{
		Timeout: fetchTimeout,
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

// gate allows one fetch for unknown kids per interval. Callers that
// arrive while that fetch runs wait for it (their context allowing);
// callers that arrive later within the interval are refused at once:
// nobody queues, so a flood of forged kids costs the gateway one fetch
// per interval and the service nothing that waits.
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
