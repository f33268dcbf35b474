package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	samples := make([]time.Duration, 1000)
	for i := range samples {
		samples[i] = time.Duration(i+1) * time.Microsecond
	}
	tests := []struct {
		name string
		p    float64
		want time.Duration
	}{
		{"median", 50, 500 * time.Microsecond},
		{"p99", 99, 990 * time.Microsecond},
		{"p99.9", 99.9, 999 * time.Microsecond},
		{"max", 100, 1000 * time.Microsecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(samples, tt.p); got != tt.want {
				t.Errorf("percentile(%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

func TestParseStatusReadsRSSAndHWM(t *testing.T) {
	rss, hwm, err := parseStatus([]byte("Name:\tx\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n"))
	if err != nil || rss != 1024 || hwm != 2048 {
		t.Fatalf("parseStatus = %d, %d, %v; want 1024, 2048, nil", rss, hwm, err)
	}
	if _, _, err := parseStatus([]byte("Name:\tx\n")); err == nil {
		t.Fatal("parseStatus without Vm lines: want an error")
	}
}

func TestRunCountsRequestsErrorsAndBodies(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("X-Test") != "yes" || string(b) != `{"a":1}` {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		// Every third request after the probe fails, to check error counting.
		if hits.Add(1)%3 == 0 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()

	for _, mode := range []struct {
		name string
		rate float64
	}{{"closed", 0}, {"open", 200}} {
		t.Run(mode.name, func(t *testing.T) {
			cfg := Config{
				Target: srv.URL, Path: "/x", Method: "POST", Body: []byte(`{"a":1}`),
				Headers: []header{{"X-Test", "yes"}}, Concurrency: 4,
				Duration: 200 * time.Millisecond, Rate: mode.rate, Timeout: time.Second,
				PID: os.Getpid(), Format: "json",
			}
			res, err := Run(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if res.Requests == 0 || res.Errors == 0 || res.Errors >= res.Requests {
				t.Errorf("requests %d errors %d: want some requests, some but not all failing", res.Requests, res.Errors)
			}
			if res.Status["400"] != 0 {
				t.Errorf("server saw a malformed request (headers or body lost): %v", res.Status)
			}
			if res.Status["500"] != res.Errors {
				t.Errorf("errors %d, 500s %d: every 500 must count as an error", res.Errors, res.Status["500"])
			}
			if res.PeakRSSKiB <= 0 {
				t.Errorf("peak RSS %d: want sampled from /proc", res.PeakRSSKiB)
			}
			if !(res.P50US <= res.P99US && res.P99US <= res.MaxUS) {
				t.Errorf("percentiles out of order: %+v", res)
			}
		})
	}
}

func TestParseFlagsRejectsBadInput(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"no target", []string{"-path", "/"}},
		{"relative path", []string{"-target", "http://127.0.0.1:1", "-path", "x"}},
		{"both bodies", []string{"-target", "http://127.0.0.1:1", "-body", "f", "-body-json", "{}"}},
		{"bad header", []string{"-target", "http://127.0.0.1:1", "-header", "nocolon"}},
		{"zero clients", []string{"-target", "http://127.0.0.1:1", "-c", "0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parseFlags(tt.args, io.Discard); err == nil {
				t.Errorf("parseFlags(%q): want an error", tt.args)
			}
		})
	}
}
