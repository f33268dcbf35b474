package fetch

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/tools"
)

func TestPrepareBuildsTheURLResource(t *testing.T) {
	res := newStub(
		"svc.test", "::1,127.0.0.1,127.0.0.1",
		"mixed.test", "8.8.8.8,10.0.0.1",
	)
	f := New(Options{Resolver: res})
	tests := []struct {
		name string
		args map[string]any
		want tools.Resource
	}{
		{
			"a name shows every resolved address, sorted and deduplicated",
			map[string]any{"url": "HTTP://SVC.test./a/../b?q=1#x"},
			tools.Resource{
				"type": "url", "url": "http://svc.test:80/b?q=1", "scheme": "http", "host": "svc.test",
				"port": float64(80), "path": "/b", "method": "GET",
				"addresses": []any{
					map[string]any{"ip": "127.0.0.1", "class": "loopback"},
					map[string]any{"ip": "::1", "class": "loopback"},
				},
				"address_class": "loopback",
			},
		},
		{
			"the most sensitive class wins",
			map[string]any{"url": "https://mixed.test/", "method": "POST"},
			tools.Resource{
				"type": "url", "url": "https://mixed.test:443/", "scheme": "https", "host": "mixed.test",
				"port": float64(443), "path": "/", "method": "POST",
				"addresses": []any{
					map[string]any{"ip": "8.8.8.8", "class": "public"},
					map[string]any{"ip": "10.0.0.1", "class": "private"},
				},
				"address_class": "private",
			},
		},
		{
			"a metadata literal needs no DNS",
			map[string]any{"url": "http://169.254.169.254/latest/meta-data"},
			tools.Resource{
				"type": "url", "url": "http://169.254.169.254:80/latest/meta-data", "scheme": "http",
				"host": "169.254.169.254", "port": float64(80), "path": "/latest/meta-data", "method": "GET",
				"addresses":     []any{map[string]any{"ip": "169.254.169.254", "class": "metadata"}},
				"address_class": "metadata",
			},
		},
		{
			"an IPv6 literal is shown without brackets as host",
			map[string]any{"url": "http://[::ffff:a00:1]:8080"},
			tools.Resource{
				"type": "url", "url": "http://10.0.0.1:8080/", "scheme": "http", "host": "10.0.0.1",
				"port": float64(8080), "path": "/", "method": "GET",
				"addresses":     []any{map[string]any{"ip": "10.0.0.1", "class": "private"}},
				"address_class": "private",
			},
		},
		{
			"link-local IPv6 literal",
			map[string]any{"url": "http://[fe80::1]/"},
			tools.Resource{
				"type": "url", "url": "http://[fe80::1]:80/", "scheme": "http", "host": "fe80::1",
				"port": float64(80), "path": "/", "method": "GET",
				"addresses":     []any{map[string]any{"ip": "fe80::1", "class": "link_local"}},
				"address_class": "link_local",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := mustPrepare(t, f, tt.args)
			if len(plan.Resources) != 1 || !reflect.DeepEqual(plan.Resources[0], tt.want) {
				t.Fatalf("resources = %#v\nwant %#v", plan.Resources, tt.want)
			}
		})
	}
}

func TestLegacyNumericHostsAreLoopbackAndNeverReachDNS(t *testing.T) {
	res := newStub()
	f := New(Options{Resolver: res})
	for _, u := range []string{
		"http://2130706433/", "http://0x7f000001/", "http://0177.0.0.1/", "http://127.1/",
		"http://[::ffff:127.0.0.1]/", "http://127.0.0.1./",
	} {
		plan := mustPrepare(t, f, map[string]any{"url": u})
		r := plan.Resources[0]
		if r["host"] != "127.0.0.1" || r["address_class"] != "loopback" {
			t.Errorf("%s: host %v class %v, want 127.0.0.1 loopback", u, r["host"], r["address_class"])
		}
	}
	if n := res.count(); n != 0 {
		t.Fatalf("resolver called %d times for numeric hosts", n)
	}
}

func TestPrepareArgsShowWhatWillRun(t *testing.T) {
	f := New(Options{Resolver: newStub("svc.test", "127.0.0.1")})
	tests := []struct {
		name string
		args map[string]any
		want map[string]any
	}{
		{
			"GET gets its defaults and the canonical URL",
			map[string]any{"url": "http://SVC.test/x#f"},
			map[string]any{"url": "http://svc.test:80/x", "method": "GET", "headers": map[string]any{}},
		},
		{
			"POST without body sends an empty one; header names are canonical",
			map[string]any{"url": "http://svc.test/x", "method": "POST", "headers": map[string]any{"x-api-key": "k", "content-TYPE": "text/plain"}},
			map[string]any{"url": "http://svc.test:80/x", "method": "POST", "body": "",
				"headers": map[string]any{"X-Api-Key": "k", "Content-Type": "text/plain"}},
		},
		{
			"POST with body",
			map[string]any{"url": "http://svc.test/x", "method": "POST", "body": "a=1"},
			map[string]any{"url": "http://svc.test:80/x", "method": "POST", "body": "a=1", "headers": map[string]any{}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := mustPrepare(t, f, tt.args)
			if !reflect.DeepEqual(plan.Args, tt.want) {
				t.Fatalf("args = %#v\nwant %#v", plan.Args, tt.want)
			}
		})
	}
}

func TestArtifactDoesNotAliasArgs(t *testing.T) {
	f := New(Options{Resolver: newStub("svc.test", "127.0.0.1")})
	in := map[string]any{"url": "http://svc.test/x", "headers": map[string]any{"X-A": "1"}}
	plan := mustPrepare(t, f, in)
	in["headers"].(map[string]any)["X-A"] = "changed"
	plan.Args["headers"].(map[string]any)["X-A"] = "changed"
	plan.Args["url"] = "http://elsewhere.test/"
	a := plan.Artifact.(artifact)
	if got := a.header.Get("X-A"); got != "1" {
		t.Fatalf("artifact header = %q after args changed", got)
	}
	if a.target.String() != "http://svc.test:80/x" {
		t.Fatalf("artifact target = %q", a.target.String())
	}
}

func TestPrepareRefusesBadArguments(t *testing.T) {
	many := map[string]any{}
	for i := 0; i <= maxHeaders; i++ {
		many["X-H"+strconv.Itoa(i)] = "v"
	}
	f := New(Options{Resolver: newStub("svc.test", "127.0.0.1")})
	tests := []struct {
		name    string
		args    map[string]any
		pointer string
		rule    string
	}{
		{"missing url", map[string]any{}, "/url", "is required"},
		{"url of the wrong type", map[string]any{"url": 1.0}, "/url", "must be a string"},
		{"unknown method", map[string]any{"url": "http://svc.test/", "method": "PUT"}, "/method", "GET or POST"},
		{"body with GET", map[string]any{"url": "http://svc.test/", "body": "x"}, "/body", "only allowed with method POST"},
		{"body with default method", map[string]any{"url": "http://svc.test/", "body": ""}, "/body", "only allowed with method POST"},
		{"body too large", map[string]any{"url": "http://svc.test/", "method": "POST", "body": strings.Repeat("é", maxBodyBytes/2+1)}, "/body", "at most"},
		{"url too long", map[string]any{"url": "http://svc.test/" + strings.Repeat("a", maxURLBytes)}, "/url", "at most"},
		{"unresolvable host", map[string]any{"url": "http://nowhere.test/"}, "/url", "host does not resolve"},
		{"Host header", map[string]any{"url": "http://svc.test/", "headers": map[string]any{"Host": "evil"}}, "/headers/Host", "set by the gateway"},
		{"content-length header", map[string]any{"url": "http://svc.test/", "headers": map[string]any{"content-length": "5"}}, "/headers/content-length", "set by the gateway"},
		{"Transfer-Encoding header", map[string]any{"url": "http://svc.test/", "headers": map[string]any{"Transfer-Encoding": "chunked"}}, "/headers/Transfer-Encoding", "set by the gateway"},
		{"Connection header", map[string]any{"url": "http://svc.test/", "headers": map[string]any{"CONNECTION": "close"}}, "/headers/CONNECTION", "set by the gateway"},
		{"Keep-Alive header", map[string]any{"url": "http://svc.test/", "headers": map[string]any{"Keep-Alive": "1"}}, "/headers/Keep-Alive", "set by the gateway"},
		{"TE header", map[string]any{"url": "http://svc.test/", "headers": map[string]any{"te": "trailers"}}, "/headers/te", "set by the gateway"},
		{"Upgrade header", map[string]any{"url": "http://svc.test/", "headers": map[string]any{"Upgrade": "h2c"}}, "/headers/Upgrade", "set by the gateway"},
		{"Trailer header", map[string]any{"url": "http://svc.test/", "headers": map[string]any{"Trailer": "x"}}, "/headers/Trailer", "set by the gateway"},
		{"Proxy-Authorization header", map[string]any{"url": "http://svc.test/", "headers": map[string]any{"Proxy-Authorization": "x"}}, "/headers/Proxy-Authorization", "set by the gateway"},
		{"any Proxy- header", map[string]any{"url": "http://svc.test/", "headers": map[string]any{"proxy-anything": "x"}}, "/headers/proxy-anything", "set by the gateway"},
		{"CRLF in a value", map[string]any{"url": "http://svc.test/", "headers": map[string]any{"X-A": "a\r\nHost: evil"}}, "/headers/X-A", "control characters"},
		{"NUL in a value", map[string]any{"url": "http://svc.test/", "headers": map[string]any{"X-A": "a\x00"}}, "/headers/X-A", "control characters"},
		{"name that is no token", map[string]any{"url": "http://svc.test/", "headers": map[string]any{"X A": "v"}}, "/headers", "HTTP tokens"},
		{"name with a colon", map[string]any{"url": "http://svc.test/", "headers": map[string]any{"X-A:": "v"}}, "/headers", "HTTP tokens"},
		{"names equal but for case", map[string]any{"url": "http://svc.test/", "headers": map[string]any{"X-A": "1", "x-a": "2"}}, "/headers/x-a", "given twice"},
		{"value of the wrong type", map[string]any{"url": "http://svc.test/", "headers": map[string]any{"X-A": 1.0}}, "/headers/X-A", "must be a string"},
		{"too many headers", map[string]any{"url": "http://svc.test/", "headers": many}, "/headers", "at most 32"},
		{"headers not an object", map[string]any{"url": "http://svc.test/", "headers": "X-A: 1"}, "/headers", "must be an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.Prepare(context.Background(), env(), tt.args)
			ae := wantArgError(t, err, tt.pointer)
			if !strings.Contains(ae.Rule, tt.rule) {
				t.Fatalf("rule %q does not contain %q", ae.Rule, tt.rule)
			}
		})
	}
}

func TestHostWithoutAddressesDoesNotResolve(t *testing.T) {
	f := New(Options{Resolver: newStub("empty.test", "")})
	_, err := f.Prepare(context.Background(), env(), map[string]any{"url": "http://empty.test/"})
	if ae := wantArgError(t, err, "/url"); ae.Rule != "host does not resolve" {
		t.Fatalf("rule = %q", ae.Rule)
	}
}

func TestCanceledLookupIsNotTheModelsFault(t *testing.T) {
	f := New(Options{Resolver: newStub("svc.test", "127.0.0.1")})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.Prepare(ctx, env(), map[string]any{"url": "http://svc.test/"})
	var ae *tools.ArgError
	if errors.As(err, &ae) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestPinnedAddressesAreCapped(t *testing.T) {
	var addrs []string
	for i := 1; i <= 40; i++ {
		addrs = append(addrs, "127.0.0."+strconv.Itoa(i))
	}
	f := New(Options{Resolver: newStub("many.test", strings.Join(addrs, ","))})
	plan := mustPrepare(t, f, map[string]any{"url": "http://many.test/"})
	shown := plan.Resources[0]["addresses"].([]any)
	pinned := plan.Artifact.(artifact).addrs
	if len(shown) != maxAddresses || len(pinned) != maxAddresses {
		t.Fatalf("shown %d, pinned %d, want %d each", len(shown), len(pinned), maxAddresses)
	}
	for i, a := range pinned {
		if shown[i].(map[string]any)["ip"] != a.String() {
			t.Fatalf("address %d shown %v, pinned %v", i, shown[i], a)
		}
	}
}
