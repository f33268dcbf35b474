package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// recorder holds one worker's samples; workers never share one, so
// recording takes no lock.
type recorder struct {
	lat       []time.Duration
	last      time.Time
	errors    int
	transport int
	status    map[int]int
}

func newRecorder() *recorder {
	return &recorder{lat: make([]time.Duration, 0, 1<<14), status: map[int]int{}}
}

// add records one finished request.
func (r *recorder) add(d time.Duration, done time.Time, status int, err error) {
	r.lat = append(r.lat, d)
	if done.After(r.last) {
		r.last = done
	}
	switch {
	case status == 0:
		r.transport++
		r.errors++
	case status < 200 || status > 299:
		r.status[status]++
		r.errors++
	default:
		r.status[status]++
		if err != nil { // body read failed after a 2xx
			r.transport++
			r.errors++
		}
	}
}

// Result is the outcome of one run. Latencies are in microseconds.
type Result struct {
	Label       string         `json:"label,omitempty"`
	URL         string         `json:"url"`
	Mode        string         `json:"mode"`
	Concurrency int            `json:"concurrency"`
	Rate        float64        `json:"rate,omitempty"`
	DurationS   float64        `json:"duration_s"`
	Requests    int            `json:"requests"`
	Errors      int            `json:"errors"`
	Transport   int            `json:"transport_errors"`
	Status      map[string]int `json:"status"`
	Throughput  float64        `json:"throughput_rps"`
	MeanUS      float64        `json:"mean_us"`
	P50US       float64        `json:"p50_us"`
	P90US       float64        `json:"p90_us"`
	P99US       float64        `json:"p99_us"`
	P999US      float64        `json:"p999_us"`
	MaxUS       float64        `json:"max_us"`
	PeakRSSKiB  int64          `json:"peak_rss_kib,omitempty"` // max VmRSS sampled during the run
	VmHWMKiB    int64          `json:"vm_hwm_kib,omitempty"`   // kernel's lifetime high-water mark
}

// merge combines the workers' samples into a Result.
func merge(cfg Config, recs []*recorder, measureFrom time.Time) *Result {
	res := &Result{
		Label: cfg.Label, URL: cfg.URL(), Mode: cfg.Mode(),
		Concurrency: cfg.Concurrency, Rate: cfg.Rate, Status: map[string]int{},
	}
	var all []time.Duration
	var last time.Time
	for _, r := range recs {
		all = append(all, r.lat...)
		res.Errors += r.errors
		res.Transport += r.transport
		for code, n := range r.status {
			res.Status[strconv.Itoa(code)] += n
		}
		if r.last.After(last) {
			last = r.last
		}
	}
	res.Requests = len(all)
	if res.Requests == 0 {
		return res
	}
	// Throughput over the span actually covered: from the start of
	// measurement to the last recorded completion.
	elapsed := last.Sub(measureFrom)
	if elapsed < cfg.Duration {
		elapsed = cfg.Duration
	}
	res.DurationS = elapsed.Seconds()
	res.Throughput = float64(res.Requests) / elapsed.Seconds()

	slices.Sort(all)
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	res.MeanUS = us(sum / time.Duration(len(all)))
	res.P50US = us(percentile(all, 50))
	res.P90US = us(percentile(all, 90))
	res.P99US = us(percentile(all, 99))
	res.P999US = us(percentile(all, 99.9))
	res.MaxUS = us(all[len(all)-1])
	return res
}

// percentile is the nearest-rank percentile of sorted samples.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(sorted))+0.999999999) - 1
	rank = max(0, min(rank, len(sorted)-1))
	return sorted[rank]
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// Write prints r in the given format: plain (human), json (one object) or
// tsv (one header-less line, the columns of TSVHeader).
func (r *Result) Write(w io.Writer, format string) error {
	switch format {
	case "json":
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "tsv":
		_, err := fmt.Fprintf(w, "%s\t%s\t%d\t%.0f\t%d\t%d\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%d\n",
			orDash(r.Label), r.Mode, r.Concurrency, r.Rate, r.Requests, r.Errors, r.Throughput,
			r.P50US, r.P90US, r.P99US, r.P999US, r.MaxUS, r.PeakRSSKiB)
		return err
	default:
		var b strings.Builder
		if r.Label != "" {
			fmt.Fprintf(&b, "%s\n", r.Label)
		}
		mode := fmt.Sprintf("closed loop, %d clients", r.Concurrency)
		if r.Mode == "open" {
			mode = fmt.Sprintf("open loop, %.0f req/s, ≤%d in flight", r.Rate, r.Concurrency)
		}
		fmt.Fprintf(&b, "  %s  %s  %.1fs\n", r.URL, mode, r.DurationS)
		fmt.Fprintf(&b, "  requests %d  errors %d (transport %d)  status %s\n",
			r.Requests, r.Errors, r.Transport, statusString(r.Status))
		fmt.Fprintf(&b, "  throughput %.1f req/s\n", r.Throughput)
		fmt.Fprintf(&b, "  latency µs  mean %.0f  p50 %.0f  p90 %.0f  p99 %.0f  p99.9 %.0f  max %.0f\n",
			r.MeanUS, r.P50US, r.P90US, r.P99US, r.P999US, r.MaxUS)
		if r.PeakRSSKiB > 0 {
			fmt.Fprintf(&b, "  peak RSS %.1f MiB (VmHWM %.1f MiB)\n",
				float64(r.PeakRSSKiB)/1024, float64(r.VmHWMKiB)/1024)
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
}

// TSVHeader names the columns of the tsv format.
const TSVHeader = "label\tmode\tc\trate\trequests\terrors\trps\tp50_us\tp90_us\tp99_us\tp999_us\tmax_us\tpeak_rss_kib"

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func statusString(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s×%d", k, m[k])
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}
