package fetch

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/tools"
)

// defaultUserAgent is sent when the call gave no User-Agent.
const defaultUserAgent = "toolgate-fetch/1"

// maxResponseHeaderBytes bounds what the transport reads of the headers.
const maxResponseHeaderBytes = 64 << 10

// Run sends the prepared request to the pinned addresses and renders the
// response.
func (f *Fetch) Run(ctx context.Context, _ *tools.Env, art any, lim tools.Limits) (tools.Result, error) {
	a, ok := art.(artifact)
	if !ok {
		return tools.Result{}, fmt.Errorf("fetch: artifact of type %T", art)
	}
	tr := f.transport(a)
	defer tr.CloseIdleConnections()

	var stop redirectStop
	client := &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			next, err := targetOf(req.URL)
			switch {
			case err != nil || !a.target.sameOrigin(next):
				stop = stopOtherOrigin
			case len(via) > maxRedirects:
				stop = stopTooMany
			default:
				return nil
			}
			return http.ErrUseLastResponse
		},
	}

	var body io.Reader
	if a.hasReq {
		body = strings.NewReader(a.body)
	}
	req, err := http.NewRequestWithContext(ctx, a.method, a.target.String(), body)
	if err != nil {
		return tools.Result{}, &netError{method: a.method, host: a.target.host, reason: "invalid request"}
	}
	req.Header = a.header.Clone()
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", defaultUserAgent)
	}
	req.Host = a.target.hostHeader()

	resp, err := client.Do(req)
	if err != nil {
		return tools.Result{}, newNetError(a, err)
	}
	defer resp.Body.Close()
	return f.render(a, resp, stop, outputCap(lim, f.spec.Limits.MaxOutputBytes))
}

// transport dials only the pinned addresses; it is per call, so that no
// connection outlives the decision that allowed it.
func (f *Fetch) transport(a artifact) *http.Transport {
	return &http.Transport{
		Proxy: nil, // never from the environment: the pinned address is the peer
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return f.dialPinned(ctx, a, addr)
		},
		TLSClientConfig: &tls.Config{
			ServerName: a.target.host,
			RootCAs:    f.opts.RootCAs,
			MinVersion: tls.VersionTLS12,
		},
		TLSHandshakeTimeout:    f.opts.TLSHandshakeTimeout,
		ResponseHeaderTimeout:  f.opts.ResponseHeaderTimeout,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		ForceAttemptHTTP2:      true,
		MaxIdleConnsPerHost:    1,
	}
}

// dialPinned ignores DNS entirely: it connects to the prepared addresses,
// in order, on the prepared port. addr (what the transport wants) can only
// name the approved origin, since other redirects are not followed; a
// different port is refused rather than silently re-aimed.
func (f *Fetch) dialPinned(ctx context.Context, a artifact, addr string) (net.Conn, error) {
	if _, port, err := net.SplitHostPort(addr); err != nil || port != strconv.Itoa(a.target.port) {
		return nil, fmt.Errorf("dial: %w", tools.ErrTargetChanged)
	}
	var first error
	for _, ip := range a.addrs {
		dctx, cancel := context.WithTimeout(ctx, f.opts.DialTimeout)
		c, err := f.opts.DialContext(dctx, "tcp", netip.AddrPortFrom(ip, uint16(a.target.port)).String())
		cancel()
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// redirectStop says why a redirect was returned rather than followed.
type redirectStop int

const (
	stopNone redirectStop = iota
	stopOtherOrigin
	stopTooMany
)

// outputCap is the byte budget of a call: the limit passed in, or the
// tool's own when none was.
func outputCap(lim tools.Limits, own int) int {
	if lim.MaxOutputBytes > 0 {
		return lim.MaxOutputBytes
	}
	return own
}
