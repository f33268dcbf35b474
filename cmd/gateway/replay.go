package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/decision"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/replay"
	"github.com/toolgate/toolgate/internal/store"
)

// policyReplay re-evaluates the audited decisions of the configured audit
// store against a candidate policy folder and prints how many would
// change.
func policyReplay(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("policy replay", stderr)
	file := fs.String("config", "gateway.yaml", "configuration file (for the audit store and tenants)")
	dir := fs.String("policy", "", "candidate policy folder (required)")
	from := fs.String("from", "", "only events at or after this RFC 3339 time")
	to := fs.String("to", "", "only events at or before this RFC 3339 time")
	tenant := fs.String("tenant", "", "only this tenant (default: every configured tenant)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	failOnChange := fs.Bool("fail-on-change", false, "exit 1 when the candidate decides any audited decision otherwise (for CI)")
	if err := parse(fs, args); err != nil {
		return exitUsage
	}
	if *dir == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: gateway policy replay --config FILE --policy DIR [--from T] [--to T] [--tenant T] [--json] [--fail-on-change]")
		return exitUsage
	}
	var opts replay.Options
	for _, tb := range []struct {
		name, v string
		dst     *time.Time
	}{{"from", *from, &opts.From}, {"to", *to, &opts.To}} {
		if tb.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, tb.v)
		if err != nil {
			fmt.Fprintf(stderr, "gateway policy replay: --%s must be an RFC 3339 time\n", tb.name)
			return exitUsage
		}
		*tb.dst = t
	}
	cfg, code := loadConfig(*file, stderr)
	if cfg == nil {
		return code
	}
	if *tenant != "" {
		if _, ok := cfg.Tenants[*tenant]; !ok {
			fmt.Fprintf(stderr, "gateway policy replay: tenant %q is not configured in %s\n", *tenant, cfg.File)
			return exitUsage
		}
		opts.Tenants = []string{*tenant}
	} else {
		for t := range cfg.Tenants {
			opts.Tenants = append(opts.Tenants, t)
		}
		slices.Sort(opts.Tenants)
	}

	ctx := context.Background()
	eng := decision.NewEngine(decision.Options{Dir: *dir})
	if err := eng.Load(ctx); err != nil {
		fmt.Fprintf(stderr, "gateway policy replay: candidate policy: %v\n", err)
		return exitRuntime
	}
	rev, _ := eng.Current()
	// Read-only: replay never migrates, creates or writes anything; a
	// database that is not at this gateway's schema is refused.
	db, err := gateway.OpenStore(ctx, cfg, nil, store.ReadOnly())
	if err != nil {
		fmt.Fprintf(stderr, "gateway policy replay: %v\n", err)
		return exitRuntime
	}
	defer db.Close()
	rep, err := replay.Run(ctx, db.Audit(), rev, opts)
	if err != nil {
		fmt.Fprintf(stderr, "gateway policy replay: %v\n", err)
		return exitRuntime
	}
	if *asJSON {
		b, err := json.Marshal(rep, json.Deterministic(true), jsontext.WithIndent("  "))
		if err != nil {
			fmt.Fprintf(stderr, "gateway policy replay: %v\n", err)
			return exitRuntime
		}
		fmt.Fprintln(stdout, string(b))
	} else {
		fmt.Fprint(stdout, rep.Text())
	}
	if *failOnChange && rep.Changed > 0 {
		fmt.Fprintf(stderr, "gateway policy replay: %d decision(s) change under the candidate (--fail-on-change)\n", rep.Changed)
		return exitRuntime
	}
	return exitOK
}
