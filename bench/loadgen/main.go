// Command loadgen drives one HTTP endpoint with a fixed request, closed loop
// at a given concurrency or open loop at a fixed rate, and reports
// throughput, latency percentiles, errors and (optionally) the peak RSS of a
// server process. It is the load generator of the side-by-side harness in
// bench/compare.sh (issue 5); both sides of a comparison get exactly the same
// client, so client cost cancels out of the ratios.
//
// Usage:
//
//	go run ./bench/loadgen -target http://127.0.0.1:8080 -path /v1/tools/read-file/decisions \
//	  -body-json '{"arguments":{"path":"docs/guide.md"}}' -header 'Authorization: Bearer …' \
//	  -c 16 -duration 10s [-rate 2000] [-warmup 2s] [-pid PID] [-format plain|json|tsv]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args, runs the load and prints the result; it returns the exit
// code (0 ok, 1 runtime failure, 2 usage).
func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "loadgen:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	res, err := Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 1
	}
	if err := res.Write(stdout, cfg.Format); err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 1
	}
	return 0
}

// parseFlags turns the command line into a Config.
func parseFlags(args []string, stderr io.Writer) (Config, error) {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		cfg      Config
		bodyFile string
		bodyJSON string
		headers  headerList
	)
	fs.StringVar(&cfg.Target, "target", "", "base URL, e.g. http://127.0.0.1:8080 (required)")
	fs.StringVar(&cfg.Path, "path", "/", "request path")
	fs.StringVar(&cfg.Method, "method", "", "HTTP method (default POST with a body, GET without)")
	fs.StringVar(&bodyFile, "body", "", "file holding the request body")
	fs.StringVar(&bodyJSON, "body-json", "", "request body given inline (sent as application/json)")
	fs.Var(&headers, "header", "request header 'Name: value' (repeatable)")
	fs.IntVar(&cfg.Concurrency, "c", 16, "concurrent connections (closed loop: clients; open loop: max in flight)")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Second, "measured duration")
	fs.DurationVar(&cfg.Warmup, "warmup", 2*time.Second, "unmeasured warm-up before the measured duration")
	fs.Float64Var(&cfg.Rate, "rate", 0, "open loop: requests per second on a fixed schedule (0 = closed loop)")
	fs.DurationVar(&cfg.Timeout, "timeout", 10*time.Second, "per-request timeout")
	fs.IntVar(&cfg.PID, "pid", 0, "process whose peak RSS to sample from /proc/PID/status")
	fs.StringVar(&cfg.Label, "label", "", "label printed with the result")
	fs.StringVar(&cfg.Format, "format", "plain", "output: plain, json or tsv")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if bodyFile != "" && bodyJSON != "" {
		return cfg, errors.New("-body and -body-json are exclusive")
	}
	switch {
	case bodyFile != "":
		b, err := os.ReadFile(bodyFile)
		if err != nil {
			return cfg, fmt.Errorf("reading -body: %w", err)
		}
		cfg.Body = b
	case bodyJSON != "":
		cfg.Body = []byte(bodyJSON)
	}
	cfg.Headers = headers
	if cfg.Method == "" {
		cfg.Method = "GET"
		if cfg.Body != nil {
			cfg.Method = "POST"
		}
	}
	return cfg, cfg.Validate()
}
