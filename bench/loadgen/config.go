package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Config is one load run: what to send, how hard and for how long.
type Config struct {
	Target      string
	Path        string
	Method      string
	Body        []byte
	Headers     []header
	Concurrency int
	Duration    time.Duration
	Warmup      time.Duration
	Rate        float64 // requests per second; 0 means closed loop
	Timeout     time.Duration
	PID         int
	Label       string
	Format      string
}

// Validate reports the first problem with c.
func (c Config) Validate() error {
	if c.Target == "" {
		return errors.New("-target is required")
	}
	u, err := url.Parse(c.Target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("-target %q: want an http(s) base URL", c.Target)
	}
	if !strings.HasPrefix(c.Path, "/") {
		return fmt.Errorf("-path %q: must start with /", c.Path)
	}
	if c.Concurrency < 1 {
		return errors.New("-c must be at least 1")
	}
	if c.Duration <= 0 {
		return errors.New("-duration must be positive")
	}
	if c.Warmup < 0 || c.Rate < 0 || c.Timeout <= 0 {
		return errors.New("-warmup and -rate must not be negative, -timeout must be positive")
	}
	switch c.Format {
	case "plain", "json", "tsv":
	default:
		return fmt.Errorf("-format %q: want plain, json or tsv", c.Format)
	}
	return nil
}

// Mode names the loop discipline for output.
func (c Config) Mode() string {
	if c.Rate > 0 {
		return "open"
	}
	return "closed"
}

// URL is the full request URL.
func (c Config) URL() string {
	return strings.TrimRight(c.Target, "/") + c.Path
}

// header is one request header from the command line.
type header struct{ name, value string }

// headerList collects repeated -header flags.
type headerList []header

// String implements flag.Value.
func (h *headerList) String() string {
	parts := make([]string, len(*h))
	for i, x := range *h {
		parts[i] = x.name + ": …" // values may be secrets
	}
	return strings.Join(parts, ", ")
}

// Set implements flag.Value; it accepts "Name: value".
func (h *headerList) Set(s string) error {
	name, value, ok := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" {
		return fmt.Errorf("header %q: want 'Name: value'", s)
	}
	*h = append(*h, header{http.CanonicalHeaderKey(name), strings.TrimSpace(value)})
	return nil
}
