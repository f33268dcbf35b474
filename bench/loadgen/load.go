package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Run drives cfg.URL() for cfg.Warmup (unrecorded) then cfg.Duration
// (recorded) and returns the merged result. Closed loop: cfg.Concurrency
// clients each send the next request as soon as the previous one finishes.
// Open loop: request i is due at start + i/rate whatever happened before it,
// and its latency is measured from that due time, so a stalled server is
// charged for the requests it kept waiting (no coordinated omission);
// cfg.Concurrency bounds how many are in flight.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	client := newClient(cfg)
	defer client.CloseIdleConnections()

	// One request up front: a wrong URL or a refused connection is a setup
	// error, not ten seconds of transport errors.
	if _, err := send(ctx, client, cfg); err != nil {
		return nil, fmt.Errorf("probe request: %w", err)
	}

	var sampler *rssSampler
	if cfg.PID > 0 {
		s, err := startRSSSampler(cfg.PID, 50*time.Millisecond)
		if err != nil {
			return nil, err
		}
		sampler = s
	}

	start := time.Now()
	measureFrom := start.Add(cfg.Warmup)
	end := measureFrom.Add(cfg.Duration)
	runCtx, cancel := context.WithDeadline(ctx, end.Add(cfg.Timeout))
	defer cancel()

	recs := make([]*recorder, cfg.Concurrency)
	var next atomic.Int64
	var wg sync.WaitGroup
	for i := range recs {
		recs[i] = newRecorder()
		wg.Go(func() {
			if cfg.Rate > 0 {
				openLoop(runCtx, client, cfg, recs[i], &next, start, measureFrom, end)
			} else {
				closedLoop(runCtx, client, cfg, recs[i], measureFrom, end)
			}
		})
	}
	wg.Wait()

	res := merge(cfg, recs, measureFrom)
	if sampler != nil {
		res.PeakRSSKiB, res.VmHWMKiB = sampler.stop()
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	return res, nil
}

// closedLoop sends back to back until end, recording requests started at or
// after measureFrom.
func closedLoop(ctx context.Context, client *http.Client, cfg Config, rec *recorder, measureFrom, end time.Time) {
	for {
		t0 := time.Now()
		if !t0.Before(end) || ctx.Err() != nil {
			return
		}
		status, err := send(ctx, client, cfg)
		t1 := time.Now()
		if !t0.Before(measureFrom) {
			rec.add(t1.Sub(t0), t1, status, err)
		}
	}
}

// openLoop takes the next schedule slot, waits for its due time, sends, and
// records the latency from the due time.
func openLoop(ctx context.Context, client *http.Client, cfg Config, rec *recorder, next *atomic.Int64, start, measureFrom, end time.Time) {
	interval := float64(time.Second) / cfg.Rate
	for {
		i := next.Add(1) - 1
		due := start.Add(time.Duration(float64(i) * interval))
		if !due.Before(end) || ctx.Err() != nil {
			return
		}
		if d := time.Until(due); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		status, err := send(ctx, client, cfg)
		t1 := time.Now()
		if !due.Before(measureFrom) {
			rec.add(t1.Sub(due), t1, status, err)
		}
	}
}

// send performs one request and drains the body so the connection is reused.
func send(ctx context.Context, client *http.Client, cfg Config) (int, error) {
	var body io.Reader
	if cfg.Body != nil {
		body = bytes.NewReader(cfg.Body)
	}
	req, err := http.NewRequestWithContext(ctx, cfg.Method, cfg.URL(), body)
	if err != nil {
		return 0, err
	}
	for _, h := range cfg.Headers {
		req.Header.Add(h.name, h.value)
	}
	if cfg.Body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	if cerr := resp.Body.Close(); err == nil {
		err = cerr
	}
	return resp.StatusCode, err
}

// newClient returns a keep-alive client with enough idle connections that
// no client ever has to dial mid-run.
func newClient(cfg Config) *http.Client {
	idle := 2 * cfg.Concurrency
	return &http.Client{
		Timeout: cfg.Timeout,
		Transport: &http.Transport{
			Proxy:               nil, // loopback benchmark: never via a proxy
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        idle,
			MaxIdleConnsPerHost: idle,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
			ForceAttemptHTTP2:   false,
		},
	}
}
