package mcptool

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
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

// Namespace is the upstream's configured name.
func (u *Upstream) Namespace() string { return u.o.Namespace }

// withheldState is a tool's current reason not to be offered.
type withheldState = atomic.Pointer[string]
