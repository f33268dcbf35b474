package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"

	"github.com/toolgate/toolgate/internal/config"
	"github.com/toolgate/toolgate/internal/gateway"
	"github.com/toolgate/toolgate/internal/store"
)

// The README's walk-through is run as written, so that it cannot drift
// from the program: the shell block under "## Walk-through" is
// interpreted (mvdan.cc/sh) against a real gateway on loopback built from
// a temp copy of the shipped gateway.yaml, policies/ and demo/. `go run
// ./cmd/gateway ARGS` runs this command's own code (run(ARGS)), and curl
// becomes an HTTP request to that gateway. Each command followed directly
// by "# …" comment lines must print exactly that text, where "…" stands
// for anything; a curl whose output is not shown must still get a 2xx.
// Steps are paced as a reader's are, so the test takes a few seconds.
func TestReadmeWalkThrough(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	block, err := shellBlockUnder(string(readme), "## Walk-through")
	if err != nil {
		t.Fatal(err)
	}
	steps, err := walkSteps(block)
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) == 0 {
		t.Fatal("the walk-through has no commands")
	}

	// The shipped files, copied: the gateway writes var/ beside its config.
	dir := t.TempDir()
	for _, p := range []string{"gateway.yaml", "policies", "demo"} {
		src := filepath.Join("../..", p)
		fi, err := os.Stat(src)
		if err != nil {
			t.Fatal(err)
		}
		if fi.IsDir() {
			err = os.CopyFS(filepath.Join(dir, p), os.DirFS(src))
		} else {
			var b []byte
			if b, err = os.ReadFile(src); err == nil {
				err = os.WriteFile(filepath.Join(dir, p), b, 0o644)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir) // `--config gateway.yaml`, as the reader's shell has it

	cfg, err := config.Load("gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	g, err := gateway.New(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- g.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-served
		g.Close()
	})
	// The README's URLs name the shipped listen address.
	shown, actual := cfg.Listen, ln.Addr().String()

	sh := &walkShell{t: t, from: shown, to: actual, client: &http.Client{Timeout: 30 * time.Second}}
	var out, errOut bytes.Buffer
	runner, err := interp.New(
		interp.StdIO(nil, &out, &errOut),
		interp.Env(expand.ListEnviron("HOME="+dir, "PATH=/usr/bin:/bin")),
		interp.ExecHandlers(sh.exec),
	)
	if err != nil {
		t.Fatal(err)
	}
	// A reader types slower than the gateway checkpoints: before a step
	// whose output is shown, the log has signed a checkpoint of what the
	// earlier steps wrote (at audit.checkpoint_interval, after the
	// integrator's pass), as it has for a reader. Waits for that state in
	// the database; asserts nothing about time.
	db, err := store.Open(ctx, cfg.Audit.Driver, cfg.Audit.DSN, store.WithoutMigrations())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	checkpointed := func() {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			work, err := db.Audit().IntegrationWork(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(work) == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the events of %v were never checkpointed", work)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, s := range steps {
		if s.want != "" {
			checkpointed()
		}
		out.Reset()
		errOut.Reset()
		sh.lastStatus = 0
		if err := runner.Run(context.Background(), s.stmt); err != nil {
			t.Fatalf("README line %d: %s\n%v\nstderr: %s", s.line, s.text, err, errOut.String())
		}
		got := strings.TrimRight(out.String(), "\n")
		switch {
		case s.want != "":
			if !matchShown(s.want, got) {
				t.Errorf("README line %d: %s\nshows: %s\nprints: %s", s.line, s.text, s.want, got)
			}
		case sh.lastStatus != 0 && (sh.lastStatus < 200 || sh.lastStatus > 299):
			t.Errorf("README line %d: %s\nanswered HTTP %d: %s", s.line, s.text, sh.lastStatus, got)
		}
	}
}

// shellBlockUnder returns the first ```sh block after the heading.
func shellBlockUnder(md, heading string) (string, error) {
	i := strings.Index(md, "\n"+heading+"\n")
	if i < 0 {
		return "", fmt.Errorf("README has no heading %q", heading)
	}
	rest := md[i:]
	start := strings.Index(rest, "\n```sh\n")
	if start < 0 {
		return "", fmt.Errorf("no ```sh block under %q", heading)
	}
	rest = rest[start+len("\n```sh\n"):]
	end := strings.Index(rest, "\n```")
	if end < 0 {
		return "", fmt.Errorf("the ```sh block under %q never ends", heading)
	}
	return rest[:end+1], nil
}

type walkStep struct {
	stmt *syntax.Stmt
	line int    // in the block
	text string // the command as written (first line)
	want string // the output shown, "" when none is
}

// walkSteps parses the block and gives each statement the comment lines
// that follow it directly (no blank line between) as its shown output.
func walkSteps(block string) ([]walkStep, error) {
	f, err := syntax.NewParser().Parse(strings.NewReader(block), "walk-through")
	if err != nil {
		return nil, err
	}
	lines := strings.Split(block, "\n")
	var steps []walkStep
	for _, st := range f.Stmts {
		s := walkStep{stmt: st, line: int(st.Pos().Line()), text: strings.TrimSpace(lines[st.Pos().Line()-1])}
		var shown []string
		for n := int(st.End().Line()); n < len(lines); n++ { // lines[n] is line n+1
			l := lines[n]
			if l != "#" && !strings.HasPrefix(l, "# ") {
				break
			}
			shown = append(shown, strings.TrimPrefix(strings.TrimPrefix(l, "#"), " "))
		}
		s.want = strings.Join(shown, "\n")
		steps = append(steps, s)
	}
	return steps, nil
}

// matchShown reports whether got is the shown text, "…" matching anything.
func matchShown(shown, got string) bool {
	parts := strings.Split(shown, "…")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(`(?s)\A` + strings.Join(parts, ".*") + `\z`).MatchString(got)
}

// walkShell runs the programs the walk-through may use: `go run
// ./cmd/gateway` and curl. Anything else fails the test, so that a new
// step cannot silently go unchecked.
type walkShell struct {
	t          *testing.T
	from, to   string // the shown listen address, the real one
	client     *http.Client
	lastStatus int
}

func (w *walkShell) exec(next interp.ExecHandlerFunc) interp.ExecHandlerFunc {
	return func(ctx context.Context, args []string) error {
		hc := interp.HandlerCtx(ctx)
		switch {
		case len(args) >= 3 && args[0] == "go" && args[1] == "run" && args[2] == "./cmd/gateway":
			if code := run(args[3:], hc.Stdout, hc.Stderr); code != 0 {
				return interp.NewExitStatus(uint8(code))
			}
			return nil
		case args[0] == "curl":
			return w.curl(ctx, args[1:], hc.Stdout)
		}
		return fmt.Errorf("the walk-through runs %q, which this test does not emulate", strings.Join(args, " "))
	}
}

// curl does what curl does with the few flags the walk-through uses.
func (w *walkShell) curl(ctx context.Context, args []string, stdout io.Writer) error {
	var (
		method, url, body string
		hasBody           bool
		header            = http.Header{}
	)
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("curl %s needs a value", a)
			}
			i++
			return args[i], nil
		}
		var err error
		switch {
		case a == "-s" || a == "--silent":
		case a == "-H" || a == "--header":
			var h string
			if h, err = next(); err == nil {
				k, v, ok := strings.Cut(h, ":")
				if !ok {
					return fmt.Errorf("curl -H %q: not a header", h)
				}
				header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
			}
		case a == "-d" || a == "--data":
			body, err = next()
			hasBody = true
		case a == "-X" || a == "--request":
			method, err = next()
		case strings.HasPrefix(a, "-"):
			return fmt.Errorf("curl flag %s: not emulated by this test", a)
		default:
			if url != "" {
				return fmt.Errorf("curl with two URLs (%s, %s)", url, a)
			}
			url = a
		}
		if err != nil {
			return err
		}
	}
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	if !strings.HasPrefix(url, "http://"+w.from+"/") {
		return fmt.Errorf("curl %s: not the gateway's shipped address %s", url, w.from)
	}
	url = "http://" + w.to + strings.TrimPrefix(url, "http://"+w.from)
	if method == "" {
		method = http.MethodGet
		if hasBody {
			method = http.MethodPost
		}
	}
	var rd io.Reader
	if hasBody {
		rd = strings.NewReader(body)
		if header.Get("Content-Type") == "" {
			header.Set("Content-Type", "application/x-www-form-urlencoded") // as curl -d does
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return err
	}
	req.Header = header
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	w.lastStatus = resp.StatusCode
	if _, err := io.Copy(stdout, resp.Body); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}
