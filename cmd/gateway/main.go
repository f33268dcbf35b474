// Command gateway runs Toolgate, the policy-as-code authorization gateway
// for AI-agent tool calls, and its helper commands.
//
//	gateway [serve] [--config FILE]
//	gateway token --config FILE --tenant T --sub S [--roles a,b] [--ttl 1h]
//	gateway policy test [DIR...]
//	gateway policy check [DIR]
//	gateway policy replay --config FILE --policy DIR [--from T] [--to T] [--tenant T]
//	gateway mcp pin [--config FILE]
//	gateway mcp stdio [--config FILE] --token-file FILE
//
// Every flag may also come from the environment as TOOLGATE_<FLAG>
// (TOOLGATE_CONFIG, TOOLGATE_TENANT, ...). Exit codes: 0 ok, 1 runtime
// failure, 2 usage or configuration error.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/command"
	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/decision"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/sandbox"
	"github.com/toolgate/toolgate/internal/store"
)

const (
	exitOK      = 0
	exitRuntime = 1
	exitUsage   = 2
)

func main() {
	// The confinement helper re-executes this binary; it must do nothing
	// but confine and exec the program.
	if len(os.Args) > 1 && os.Args[1] == sandbox.SubCommand {
		os.Exit(sandbox.Main(os.Args[2:], sandbox.Payloads{command.PayloadName: command.RunInJail}))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(args, stderr)
	case "token":
		return token(args, stdout, stderr)
	case "policy":
		if len(args) == 0 {
			fmt.Fprintln(stderr, "usage: gateway policy test [DIR...] | gateway policy check [DIR] | gateway policy replay --policy DIR")
			return exitUsage
		}
		switch args[0] {
		case "test":
			return policyTest(args[1:], stdout, stderr)
		case "check":
			return policyCheck(args[1:], stdout, stderr)
		case "replay":
			return policyReplay(args[1:], stdout, stderr)
		}
		fmt.Fprintf(stderr, "gateway policy: unknown sub-command %q (want test, check or replay)\n", args[0])
		return exitUsage
	case "audit":
		switch {
		case len(args) > 0 && args[0] == "migrate":
			return auditMigrate(args[1:], stdout, stderr)
		case len(args) > 0 && args[0] == "verify":
			return auditVerify(args[1:], stdout, stderr)
		}
		fmt.Fprintln(stderr, "usage: gateway audit migrate [--config FILE] | gateway audit verify --checkpoint FILE --key FILE EXPORT.ndjson")
		return exitUsage
	case "mcp":
		if len(args) > 0 && args[0] == "pin" {
			return mcpPin(args[1:], stdout, stderr)
		}
		if len(args) > 0 && args[0] == "stdio" {
			return mcpStdio(args[1:], os.Stdin, stdout, stderr)
		}
		fmt.Fprintln(stderr, "usage: gateway mcp pin [--config FILE] | gateway mcp stdio [--config FILE] --token-file FILE")
		return exitUsage
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprintf(stderr, "gateway: unknown command %q\n%s", cmd, usage)
	return exitUsage
}

const usage = `usage:
  gateway [serve] [--config FILE]        run the gateway (default config: gateway.yaml)
  gateway token --config FILE --tenant T --sub S [--roles a,b] [--ttl 1h]
                                         print a dev JWT signed with the HS256 secret
  gateway policy test [DIR...]           run Rego tests (default: policies policies_test)
  gateway policy check [--config FILE] [--tests DIR] [DIR]
                                         strict-compile a policy folder and check the contract
  gateway policy replay --config FILE --policy DIR [--from T] [--to T] [--tenant T] [--json]
                                         re-evaluate audited decisions against a candidate policy
  gateway audit migrate [--config FILE]  apply the database's schema migrations (audit, approvals, tasks) and exit
  gateway audit verify --checkpoint FILE --key FILE EXPORT.ndjson
                                         check offline that an ndjson export is exactly the log
                                         a signed checkpoint commits to (exit 0) or say why not (1)
  gateway mcp pin [--config FILE]        connect to every MCP upstream (tools.mcp) and pin its tools'
                                         definitions in mcp.lock.json beside the config
  gateway mcp stdio [--config FILE] --token-file FILE
                                         serve one local MCP client over stdin/stdout as the
                                         holder of the credential in FILE (logs go to stderr)
Flags may also be set as TOOLGATE_<FLAG> environment variables.
`

// newFlags returns a flag set whose flags fall back to TOOLGATE_<FLAG>.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("gateway "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parse parses args, then fills every flag not given on the command line
// from its TOOLGATE_<FLAG> environment variable.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		env := "TOOLGATE_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(env); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %w", env, e)
			}
		}
	})
	return err
}

func loadConfig(file string, stderr io.Writer) (*config.Config, int) {
	cfg, err := config.Load(file)
	if err != nil {
		fmt.Fprintf(stderr, "gateway: %v\n", err)
		return nil, exitUsage
	}
	return cfg, exitOK
}

func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Log.Level))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Log.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func serve(args []string, stderr io.Writer) int {
	fs := newFlags("serve", stderr)
	file := fs.String("config", "gateway.yaml", "configuration file")
	if err := parse(fs, args); err != nil {
		return exitUsage
	}
	cfg, code := loadConfig(*file, stderr)
	if cfg == nil {
		return code
	}
	log := newLogger(cfg, stderr)
	tuneGC(log)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	g, err := gateway.New(ctx, cfg, log)
	if err != nil {
		fmt.Fprintf(stderr, "gateway: %v\n", err)
		var ce *config.Error
		if errors.As(err, &ce) {
			return exitUsage
		}
		return exitRuntime
	}
	defer g.Close()
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		fmt.Fprintf(stderr, "gateway: listen: %v\n", err)
		return exitRuntime
	}
	if err := g.Serve(ctx, ln); err != nil {
		fmt.Fprintf(stderr, "gateway: %v\n", err)
		return exitRuntime
	}
	log.Info("gateway stopped")
	return exitOK
}

func token(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("token", stderr)
	file := fs.String("config", "gateway.yaml", "configuration file")
	tenant := fs.String("tenant", "", "tenant (required)")
	sub := fs.String("sub", "", "principal id (required)")
	roles := fs.String("roles", "", "comma-separated roles")
	ttl := fs.Duration("ttl", time.Hour, "lifetime of the token")
	if err := parse(fs, args); err != nil {
		return exitUsage
	}
	if *tenant == "" || *sub == "" {
		fmt.Fprintln(stderr, "gateway token: --tenant and --sub are required")
		return exitUsage
	}
	if *ttl <= 0 || *ttl > 30*24*time.Hour {
		fmt.Fprintln(stderr, "gateway token: --ttl must be between 1s and 720h")
		return exitUsage
	}
	cfg, code := loadConfig(*file, stderr)
	if cfg == nil {
		return code
	}
	if _, ok := cfg.Tenants[*tenant]; !ok {
		fmt.Fprintf(stderr, "gateway token: tenant %q is not configured in %s\n", *tenant, cfg.File)
		return exitUsage
	}
	j := cfg.Auth.JWT
	if j.HS256SecretFile == "" {
		fmt.Fprintf(stderr, "gateway token: %s has no auth.jwt.hs256_secret_file; tokens can only be minted with an HS256 secret\n", cfg.File)
		return exitUsage
	}
	if _, err := auth.EnsureHS256Secret(j.HS256SecretFile); err != nil {
		fmt.Fprintf(stderr, "gateway token: auth.jwt.hs256_secret_file: %v\n", err)
		return exitRuntime
	}
	secret, err := auth.ReadHS256Secret(j.HS256SecretFile)
	if err != nil {
		fmt.Fprintf(stderr, "gateway token: auth.jwt.hs256_secret_file: %v\n", err)
		return exitRuntime
	}
	var rs []string
	for _, r := range strings.Split(*roles, ",") {
		if r = strings.TrimSpace(r); r != "" {
			rs = append(rs, r)
		}
	}
	tok, err := auth.MintHS256(secret, auth.MintClaims{
		Tenant: *tenant, Subject: *sub, Roles: rs, TTL: *ttl,
		Issuer: j.Issuer, Audience: j.Audience, TenantClaim: j.TenantClaim, RolesClaim: j.RolesClaim,
	}, time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "gateway token: %v\n", err)
		return exitRuntime
	}
	fmt.Fprintln(stdout, tok)
	return exitOK
}

func auditMigrate(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("audit migrate", stderr)
	file := fs.String("config", "gateway.yaml", "configuration file")
	if err := parse(fs, args); err != nil {
		return exitUsage
	}
	cfg, code := loadConfig(*file, stderr)
	if cfg == nil {
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// One schema holds every table of the database: audit events,
	// approvals and questions, tasks.
	applied, err := store.Migrate(ctx, cfg.Audit.Driver, cfg.Audit.DSN)
	for _, a := range applied {
		fmt.Fprintf(stdout, "applied migration %s\n", a)
	}
	if err != nil {
		fmt.Fprintf(stderr, "gateway audit migrate: %v\n", err)
		if errors.Is(err, store.ErrUnknownDriver) {
			return exitUsage
		}
		return exitRuntime
	}
	fmt.Fprintf(stdout, "database (%s) is at the current schema version\n", cfg.Audit.Driver)
	return exitOK
}

func policyTest(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("policy test", stderr)
	verbose := fs.Bool("v", false, "print every test")
	coverage := fs.Bool("coverage", false, "report coverage")
	if err := parse(fs, args); err != nil {
		return exitUsage
	}
	dirs := fs.Args()
	if len(dirs) == 0 {
		dirs = []string{"policies", "policies_test"}
	}
	ok, err := decision.RunTests(context.Background(), dirs, stdout, decision.TestOptions{Verbose: *verbose, Coverage: *coverage})
	if err != nil {
		fmt.Fprintf(stderr, "gateway policy test: %v\n", err)
		return exitUsage
	}
	if !ok {
		return exitRuntime
	}
	return exitOK
}

func policyCheck(args []string, stdout, stderr io.Writer) int {
	fs := newFlags("policy check", stderr)
	file := fs.String("config", "", "configuration file: also check that every enabled tool can be offered")
	tests := fs.String("tests", "", "folder of the pack's Rego tests (default: DIR_test when it exists): they must pass, and rules no test input fires are reported")
	if err := parse(fs, args); err != nil {
		return exitUsage
	}
	dir := "policies"
	if fs.NArg() > 0 {
		dir = fs.Arg(0)
	}
	var opts decision.CheckOptions
	if *file != "" {
		cfg, code := loadConfig(*file, stderr)
		if cfg == nil {
			return code
		}
		opts.Tools = cfg.Tools.Builtin
	}
	switch {
	case *tests != "":
		opts.TestDirs = []string{*tests}
	default:
		sibling := strings.TrimRight(dir, "/") + "_test"
		if fi, err := os.Stat(sibling); err == nil && fi.IsDir() {
			opts.TestDirs = []string{sibling}
		}
	}
	problems, err := decision.CheckWith(context.Background(), dir, opts)
	if err != nil {
		fmt.Fprintf(stderr, "gateway policy check: %v\n", err)
		return exitUsage
	}
	for _, p := range problems {
		fmt.Fprintln(stdout, p.String())
	}
	n := len(problems)
	if len(opts.TestDirs) > 0 {
		// The pack's own tests must pass too: a pack whose tests fail or
		// error is not ok (their report shows which).
		var report strings.Builder
		passed, err := decision.RunTests(context.Background(), append([]string{dir}, opts.TestDirs...), &report, decision.TestOptions{})
		if err != nil {
			fmt.Fprintf(stderr, "gateway policy check: the tests: %v\n", err)
			return exitUsage
		}
		if !passed {
			fmt.Fprintf(stdout, "the pack's tests (%s) do not pass:\n%s", strings.Join(opts.TestDirs, ", "), report.String())
			n++
		}
	}
	if n > 0 {
		fmt.Fprintf(stdout, "%d problem(s) in %s\n", n, dir)
		return exitRuntime
	}
	fmt.Fprintf(stdout, "%s: ok\n", dir)
	return exitOK
}

// serveGCPercent is the garbage collector's target for the server when the
// operator has not set GOGC. The gateway's live heap is small (tens of MB)
// while every request allocates, so Go's default of 100 collects very
// often; 200 halves the collections for a few MB more heap. BENCHMARKS.md
// has the measurement.
const serveGCPercent = 200

// tuneGC applies serveGCPercent unless GOGC is set, which always wins.
func tuneGC(log *slog.Logger) {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	debug.SetGCPercent(serveGCPercent)
	log.Debug("garbage collector target set", "gogc", serveGCPercent)
}
