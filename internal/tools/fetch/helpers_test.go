package fetch

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/tools"
)

// stubResolver maps names to addresses so that tests need no real DNS. It
// can be re-pointed between prepare and run.
type stubResolver struct {
	mu    sync.Mutex
	hosts map[string][]netip.Addr
	calls int
}

func newStub(pairs ...string) *stubResolver {
	r := &stubResolver{hosts: map[string][]netip.Addr{}}
	for i := 0; i < len(pairs); i += 2 {
		r.set(pairs[i], strings.Split(pairs[i+1], ",")...)
	}
	return r
}

func (r *stubResolver) set(host string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	as := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if a != "" {
			as = append(as, netip.MustParseAddr(a))
		}
	}
	r.hosts[host] = as
}

func (r *stubResolver) LookupNetIP(ctx context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	as, ok := r.hosts[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return append([]netip.Addr(nil), as...), nil
}

func (r *stubResolver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// dialRecorder records every address the tool dials and can refuse some.
type dialRecorder struct {
	mu     sync.Mutex
	dialed []string
	refuse map[string]bool // host part of addresses to refuse
}

func (d *dialRecorder) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.dialed = append(d.dialed, addr)
	host, _, _ := net.SplitHostPort(addr)
	refuse := d.refuse[host]
	d.mu.Unlock()
	if refuse {
		return nil, &net.OpError{Op: "dial", Net: network, Err: errors.New("refused by test")}
	}
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}

func (d *dialRecorder) addrs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dialed...)
}

// server starts a loopback HTTP server and returns its port.
func server(t testing.TB, h http.Handler) (*httptest.Server, string) {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	u, err := url.Parse(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	return ts, u.Port()
}

func env() *tools.Env { return &tools.Env{Tenant: "acme", Principal: "alice", SessionID: "s-1"} }

func mustPrepare(t testing.TB, f *Fetch, args map[string]any) tools.Plan {
	t.Helper()
	plan, err := f.Prepare(context.Background(), env(), args)
	if err != nil {
		t.Fatalf("prepare %v: %v", args, err)
	}
	return plan
}

// call prepares and runs with the tool's own limits.
func call(t testing.TB, f *Fetch, args map[string]any) (tools.Result, error) {
	t.Helper()
	plan := mustPrepare(t, f, args)
	return f.Run(context.Background(), env(), plan.Artifact, f.Spec().Limits)
}

func mustCall(t testing.TB, f *Fetch, args map[string]any) tools.Result {
	t.Helper()
	res, err := call(t, f, args)
	if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return res
}

func wantArgError(t testing.TB, err error, pointer string) *tools.ArgError {
	t.Helper()
	var ae *tools.ArgError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v (%T), want *tools.ArgError", err, err)
	}
	if ae.Pointer != pointer {
		t.Fatalf("ArgError pointer = %q, want %q (rule %q)", ae.Pointer, pointer, ae.Rule)
	}
	return ae
}

// headerSection returns the lines between the status line and the blank
// line that starts the body.
func headerSection(content string) []string {
	head, _, _ := strings.Cut(content, "\n\n")
	lines := strings.Split(head, "\n")
	return lines[1:]
}
