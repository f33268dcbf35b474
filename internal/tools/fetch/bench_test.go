package fetch

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
)

// benchBody is a small text page, the common fetch.
var benchBody = strings.Repeat("a line of a small text page\n", 64)

func benchServer(b *testing.B) string {
	_, port := server(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, benchBody)
	}))
	return port
}

// BenchmarkFetch measures Prepare+Run of a GET against a loopback server,
// through a stub resolver: a fresh pinned transport and connection per call.
func BenchmarkFetch(b *testing.B) {
	port := benchServer(b)
	f := New(Options{Resolver: newStub("svc.test", "127.0.0.1")})
	args := map[string]any{"url": "http://svc.test:" + port + "/page?x=1"}
	ctx := context.Background()
	lim := f.Spec().Limits
	b.ReportAllocs()
	for b.Loop() {
		plan, err := f.Prepare(ctx, env(), args)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Run(ctx, env(), plan.Artifact, lim); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDirectGetFreshTransport is the same request done directly with
// a new transport (and so a new connection) per call: the like-for-like
// baseline.
func BenchmarkDirectGetFreshTransport(b *testing.B) {
	port := benchServer(b)
	u := "http://127.0.0.1:" + port + "/page?x=1"
	b.ReportAllocs()
	for b.Loop() {
		tr := &http.Transport{}
		directGet(b, &http.Client{Transport: tr}, u)
		tr.CloseIdleConnections()
	}
}

// BenchmarkDirectGetKeepAlive is a plain http.Get through one shared client
// that reuses its connection: the floor.
func BenchmarkDirectGetKeepAlive(b *testing.B) {
	port := benchServer(b)
	u := "http://127.0.0.1:" + port + "/page?x=1"
	client := &http.Client{Transport: &http.Transport{}}
	b.ReportAllocs()
	for b.Loop() {
		directGet(b, client, u)
	}
}

func directGet(b *testing.B, c *http.Client, u string) {
	resp, err := c.Get(u)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.ReadAll(io.LimitReader(resp.Body, DefaultMaxBodyBytes+1)); err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
}
