package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/api/apispec"
	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/config"
)

// harness runs a real gateway on loopback, built from a real gateway.yaml
// by the same code path as `gateway serve`, with the shipped policy pack.
type harness struct {
	t      testing.TB
	dir    string
	base   string
	g      *Gateway
	secret []byte
	spec   *apispec.Spec
	client *http.Client
	mu     sync.Mutex // spec validation is not concurrent
	// stop shuts the server down gracefully (as on SIGTERM) and waits for
	// Serve to return; the gateway is closed at the end of the test.
	stop func()
}

type setup struct {
	extraYAML  string            // appended to gateway.yaml
	policy     func(dir string)  // edits the copied policy folder
	files      map[string]string // extra workspace files, "tenant/path"
	toolsYAML  string            // replaces the default tools section
	acmeYAML   string            // appended to tenants.acme (e.g. "    skills: skills\n")
	limitYAML  string            // appended to limits
	policyYAML string            // more keys of the policy section, indented by two
	// policySource replaces "  dir: policies\n" (e.g. with a bundle).
	policySource string
	authYAML     string    // added under auth: (indented two spaces)
	cacheSize    *int      // policy.decision_cache when set
	logTo        io.Writer // receives the gateway's log at debug level
	// auditYAML replaces the audit section's keys (default: SQLite at
	// audit.db), indented by two.
	auditYAML string
	// beforeNew runs on the loaded config before the gateway is built
	// (e.g. to pin MCP tool definitions).
	beforeNew func(t testing.TB, cfg *config.Config)
	// yamlFor returns more YAML appended after extraYAML, given the
	// gateway's base URL (for keys naming the gateway itself, such as
	// console.redirect_url).
	yamlFor func(base string) string
	// gatewayHelper makes the gateway binary (this test binary) build the
	// jails instead of the dedicated helper the harness builds once.
	gatewayHelper bool
	// clock, when set, is the gateway's clock (WithClock): a test moves
	// it instead of sleeping.
	clock *testClock
}

// testClock is a clock a test moves by hand.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock { return &testClock{now: time.Now()} }

// Now is the clock's time.
func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// withGatewayHelper makes the gateway re-execute itself to build its jails
// (what `go run ./cmd/gateway` does), instead of the dedicated helper.
func withGatewayHelper(s *setup) { s.gatewayHelper = true }

var (
	specOnce sync.Once
	spec     *apispec.Spec
	specErr  error
)

func loadSpec(t testing.TB) *apispec.Spec {
	specOnce.Do(func() { spec, specErr = apispec.Load("../../api/openapi.yaml") })
	if specErr != nil {
		t.Fatal(specErr)
	}
	return spec
}

func start(t testing.TB, opts ...func(*setup)) *harness {
	t.Helper()
	var s setup
	for _, o := range opts {
		o(&s)
	}
	dir := t.TempDir()
	pdir := filepath.Join(dir, "policies")
	if err := os.CopyFS(pdir, os.DirFS("../../policies")); err != nil {
		t.Fatal(err)
	}
	if s.toolsYAML == "" {
		s.toolsYAML = "tools:\n  builtin: [read-file, write-file, edit-file, glob, grep]\n"
	}
	if s.policy != nil {
		s.policy(pdir)
	}
	files := map[string]string{
		"acme/docs/guide.md":    "acme guide\nline two\n",
		"acme/notes/todo.txt":   "todo\n",
		"acme/secrets/db.env":   "PASSWORD=acme-secret\n",
		"acme/src/app.py":       "print('acme')\n",
		"acme/release/VERSION":  "1\n",
		"globex/docs/guide.md":  "globex guide\n",
		"globex/notes/todo.txt": "globex todo\n",
		"outside/secret.txt":    "OUTSIDE SECRET\n",
	}
	for k, v := range s.files {
		files[k] = v
	}
	for name, content := range files {
		p := filepath.Join(dir, "ws", filepath.FromSlash(name))
		if strings.HasPrefix(name, "outside/") {
			p = filepath.Join(dir, filepath.FromSlash(name))
		}
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(content), 0o644))
	}
	// Escapes a model might try: a relative link out of the workspace and
	// an absolute one.
	must(t, os.Symlink("../../outside", filepath.Join(dir, "ws", "acme", "escape")))
	must(t, os.Symlink(filepath.Join(dir, "outside", "secret.txt"), filepath.Join(dir, "ws", "acme", "abs-link")))
	must(t, os.Symlink("docs/guide.md", filepath.Join(dir, "ws", "acme", "guide-link")))

	if s.policySource == "" {
		s.policySource = "  dir: policies\n"
	}
	if s.auditYAML == "" {
		s.auditYAML = "  driver: sqlite\n  dsn: audit.db\n"
	}
	if s.cacheSize != nil {
		s.policyYAML += fmt.Sprintf("  decision_cache: %d\n", *s.cacheSize)
	}
	// The listener comes first, so the config may name the gateway's URL.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	base := "http://" + ln.Addr().String()
	if s.yamlFor != nil {
		s.extraYAML += s.yamlFor(base)
	}
	if !s.gatewayHelper && !strings.Contains(s.extraYAML, "sandbox:") {
		// The jails are built by cmd/toolgate-sandbox, as in the shipped
		// image: a small binary that starts in a few milliseconds (the test
		// binary links everything and, under the race detector, is
		// instrumented too).
		s.extraYAML += "sandbox:\n  helper: " + testHelper(t) + "\n"
	}
	yaml := fmt.Sprintf(`listen: "127.0.0.1:0"
policy:
%s  reload_debounce: 20ms
%saudit:
%sauth:
  jwt:
    hs256_secret_file: secret
%stenants:
  acme:
    workspace: ws/acme
%s  globex:
    workspace: ws/globex
%slimits:
  max_body_bytes: 65536
%s%s`, s.policySource, s.policyYAML, s.auditYAML, s.authYAML, s.acmeYAML, s.toolsYAML, s.limitYAML, s.extraYAML)
	cfgFile := filepath.Join(dir, "gateway.yaml")
	must(t, os.WriteFile(cfgFile, []byte(yaml), 0o644))
	cfg, err := config.Load(cfgFile)
	if err != nil {
		t.Fatal(err)
	}
	if s.beforeNew != nil {
		s.beforeNew(t, cfg)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if s.logTo != nil {
		log = slog.New(slog.NewTextHandler(s.logTo, &slog.HandlerOptions{Level: slog.LevelDebug}))
	} else if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	var gopts []Option
	if s.clock != nil {
		gopts = append(gopts, WithClock(s.clock.Now))
	}
	g, err := New(ctx, cfg, log, gopts...)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- g.Serve(ctx, ln) }()
	stop := sync.OnceFunc(func() {
		cancel()
		<-done
	})
	t.Cleanup(func() {
		stop()
		g.Close()
	})
	secret, err := auth.ReadHS256Secret(filepath.Join(dir, "secret"))
	if err != nil {
		t.Fatal(err)
	}
	return &harness{
		t: t, dir: dir, base: base, g: g, secret: secret, stop: stop,
		spec: loadSpec(t), client: &http.Client{Timeout: 30 * time.Second},
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// token mints a JWT as `gateway token` does (with the configured issuer
// and audience).
func (h *harness) token(tenant, sub string, roles ...string) string {
	h.t.Helper()
	j := h.g.cfg.Auth.JWT
	tok, err := auth.MintHS256(h.secret, auth.MintClaims{Tenant: tenant, Subject: sub, Roles: roles, TTL: time.Hour,
		Issuer: j.Issuer, Audience: j.Audience}, time.Now())
	if err != nil {
		h.t.Fatal(err)
	}
	return tok
}

type response struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

func (r response) str(key string) string {
	s, _ := r.body[key].(string)
	return s
}

func (r response) errCode() string {
	e, _ := r.body["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

// do sends a request and checks the response against api/openapi.yaml.
func (h *harness) do(method, path, token string, body []byte, header ...string) response {
	h.t.Helper()
	if strings.HasPrefix(path, "/v1/audit/") || strings.HasPrefix(path, "/v1/policy/replay") {
		// Reads of the log see every event committed before them (the
		// gateway's own integrator would within a fraction of a second).
		for tenant := range h.g.cfg.Tenants {
			h.sync(tenant)
		}
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, h.base+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	r := response{status: resp.StatusCode, header: resp.Header, raw: raw}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			h.t.Errorf("%s %s: response is not a JSON object: %v: %s", method, path, err, raw)
		}
	}
	urlPath, _, _ := strings.Cut(path, "?")
	h.mu.Lock()
	err = h.spec.Check(method, urlPath, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	h.mu.Unlock()
	if err != nil {
		h.t.Errorf("OpenAPI conformance: %v", err)
	}
	return r
}

func (h *harness) call(token, tool, body string) response {
	h.t.Helper()
	return h.do("POST", "/v1/tools/"+tool+"/calls", token, []byte(body))
}

// snapshot fingerprints every file and link under the workspaces (and the
// folder outside them), so a test can show that nothing was touched.
func (h *harness) snapshot() map[string]string {
	h.t.Helper()
	out := map[string]string{}
	for _, root := range []string{"ws", "outside"} {
		base := filepath.Join(h.dir, root)
		err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(h.dir, p)
			switch {
			case d.Type()&fs.ModeSymlink != 0:
				target, err := os.Readlink(p)
				out[rel] = "link:" + target
				return err
			case d.IsDir():
				out[rel] = "dir"
			default:
				b, err := os.ReadFile(p)
				sum := sha256.Sum256(b)
				out[rel] = hex.EncodeToString(sum[:])
				return err
			}
			return nil
		})
		if err != nil {
			h.t.Fatal(err)
		}
	}
	return out
}

func (h *harness) assertUnchanged(before map[string]string) {
	h.t.Helper()
	after := h.snapshot()
	for k, v := range before {
		if after[k] != v {
			h.t.Errorf("workspace changed: %s was %s, now %q", k, v, after[k])
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			h.t.Errorf("workspace changed: %s appeared", k)
		}
	}
}

// sync integrates the tenant's committed audit events now.
func (h *harness) sync(tenant string) {
	h.t.Helper()
	if err := h.g.audit.Sync(context.Background(), tenant); err != nil {
		h.t.Fatalf("audit sync: %v", err)
	}
}

// verify asserts the tenant's audit log verifies and returns its size.
func (h *harness) verify(tenant string) int {
	h.t.Helper()
	r := h.do("GET", "/v1/audit/verify", h.token(tenant, "auditor-1", "auditor"), nil)
	if r.status != 200 || r.body["ok"] != true {
		h.t.Fatalf("audit verify for %s: %d %s", tenant, r.status, r.raw)
	}
	return int(r.body["events_checked"].(float64))
}

// events queries the audit log as an auditor of tenant, once what was
// committed is integrated (queries other than by call or decision id see
// an event within a fraction of a second of its commit; tests wait for it).
func (h *harness) events(tenant, query string) []map[string]any {
	h.t.Helper()
	r := h.do("GET", "/v1/audit/events?"+query, h.token(tenant, "auditor-1", "auditor"), nil)
	if r.status != 200 {
		h.t.Fatalf("audit query: %d %s", r.status, r.raw)
	}
	var out []map[string]any
	for _, e := range r.body["events"].([]any) {
		out = append(out, e.(map[string]any))
	}
	return out
}
