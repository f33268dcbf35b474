package gateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-json-experiment/json"
	"go.yaml.in/yaml/v3"
)

const allTools = `tools:
  builtin: [read-file, write-file, edit-file, glob, grep, bash, fetch, process-output, process-input, process-stop, task-create, task-update, task-get, task-list]
`

// withAllTools replaces the harness's tool list with every built-in.
func withAllTools(s *setup) { s.toolsYAML = allTools }

// editData rewrites the copied policy pack's data.yaml.
func editData(t testing.TB, dir string, edit func(tenants map[string]any)) {
	t.Helper()
	f := filepath.Join(dir, "data.yaml")
	b, err := os.ReadFile(f)
	must(t, err)
	var doc map[string]any
	must(t, yaml.Unmarshal(b, &doc))
	edit(doc["toolgate"].(map[string]any)["tenants"].(map[string]any))
	out, err := yaml.Marshal(doc)
	must(t, err)
	must(t, os.WriteFile(f, out, 0o644))
}

func path(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		m = m[k].(map[string]any)
	}
	return m
}

// counter is a loopback server that counts the requests it gets.
func counter(t *testing.T, h http.Handler) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func port(srv *httptest.Server) string { return srv.URL[strings.LastIndex(srv.URL, ":")+1:] }

// The bypass corpus for fetch: rules over typed, normalized resources hold
// where rules over raw strings are fooled.
func TestFetchBypassCorpusAgainstTheDefaultPack(t *testing.T) {
	t.Parallel()
	ok, okHits := counter(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello from loopback") }))
	denied, deniedHits := counter(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "must never be reached") }))
	redir, _ := counter(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:"+port(denied)+"/admin", http.StatusFound)
	}))
	h := start(t, withAllTools, func(s *setup) {
		s.policy = func(dir string) {
			editData(t, dir, func(ten map[string]any) {
				acme := ten["acme"].(map[string]any)
				// This tenant may fetch from localhost over http, and only that.
				path(acme, "roles", "developer", "fetch")["hosts"] = []any{"localhost"}
				acme["fetch"] = map[string]any{"allow_http": true, "allow_private_hosts": []any{"localhost"}}
			})
		}
	})
	dev := h.token("acme", "alice", "developer")
	fetch := func(url string) response {
		return h.call(dev, "fetch", `{"arguments":{"url":"`+url+`"}}`)
	}
	for _, tc := range []struct {
		name, url, outcome, content string
	}{
		{"upper-case scheme and host normalize to the allowed host", "HTTP://LOCALHOST:" + port(ok) + "/x", "ok", "hello from loopback"},
		{"trailing dot normalizes to the allowed host", "http://localhost.:" + port(ok) + "/", "ok", "hello from loopback"},
		{"userinfo is refused", "http://localhost@127.0.0.1:" + port(denied) + "/", "invalid_arguments", "/url: "},
		{"loopback IP literal is not the allowed host", "http://127.0.0.1:" + port(denied) + "/", "denied", ""},
		{"decimal loopback literal", "http://2130706433:" + port(denied) + "/", "denied", ""},
		{"hex loopback literal", "http://0x7f000001:" + port(denied) + "/", "denied", ""},
		{"octal loopback literal", "http://0177.0.0.1:" + port(denied) + "/", "denied", ""},
		{"IPv6-mapped loopback literal", "http://[::ffff:127.0.0.1]:" + port(denied) + "/", "denied", ""},
		{"cloud metadata literal", "http://169.254.169.254/latest/meta-data/", "denied", ""},
		{"https to a host not in the list", "https://localhost.localdomain.invalid/", "invalid_arguments", "does not resolve"},
		{"file scheme", "file:///etc/passwd", "invalid_arguments", "/url: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := fetch(tc.url)
			if r.str("outcome") != tc.outcome || !strings.Contains(r.str("content"), tc.content) {
				t.Fatalf("got %s %q, want %s containing %q", r.str("outcome"), r.str("content"), tc.outcome, tc.content)
			}
		})
	}
	// A redirect to a denied port is not followed: the model gets the 3xx.
	r := fetch("http://localhost:" + port(redir) + "/go")
	if r.str("outcome") != "ok" || !strings.Contains(r.str("content"), "HTTP 302") || !strings.Contains(r.str("content"), "redirect not followed") {
		t.Fatalf("redirect: %s", r.raw)
	}
	if deniedHits.Load() != 0 {
		t.Fatalf("the denied server was reached %d times", deniedHits.Load())
	}
	if okHits.Load() != 2 {
		t.Fatalf("the allowed server was reached %d times, want 2", okHits.Load())
	}
	// Headers and bodies are masked in the audit log.
	h.call(dev, "fetch", `{"arguments":{"url":"http://localhost:`+port(ok)+`/","method":"POST","headers":{"Authorization":"Bearer s3cret"},"body":"s3cret"}}`)
	raw, _ := json.Marshal(h.events("acme", "tool=fetch&limit=1000"))
	if strings.Contains(string(raw), "s3cret") {
		t.Fatal("a request header or body reached the audit log")
	}
	h.verify("acme")
}

// The bypass corpus for bash against the default pack: commands are judged
// segment by segment on parsed argv, never as strings.
func TestBashBypassCorpusAgainstTheDefaultPack(t *testing.T) {
	t.Parallel()
	srv, hits := counter(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	h := start(t, withAllTools, func(s *setup) {
		s.files = map[string]string{"acme/x": "keep me\n", "globex/x": "keep me\n"}
	})
	acme := h.token("acme", "alice", "developer")
	globex := h.token("globex", "bob", "developer")
	bash := func(tok, cmd string) response {
		b, _ := json.Marshal(map[string]any{"arguments": map[string]any{"command": cmd}, "session_id": "s1"})
		return h.call(tok, "bash", string(b))
	}
	for _, tc := range []struct {
		name, token, cmd, outcome, content string
	}{
		{"plain allowed command", acme, "echo hello", "ok", "hello\n[exit code: 0]"},
		{"quoted operator is one plain segment", acme, `echo "a;b"`, "ok", "a;b"},
		{"a forbidden segment after an allowed one", acme, "git log; rm -rf x", "denied", "rm -rf x"},
		{"curl behind &&", acme, "ls && curl http://127.0.0.1:" + port(srv), "denied", "curl"},
		{"command substitution needs a human in acme", acme, "echo $(ls)", "approval_required", "approval required"},
		{"backticks need a human in acme", acme, "echo `ls`", "approval_required", "approval required"},
		{"command substitution is denied in globex", globex, "echo $(ls)", "denied", "command_substitution"},
		{"a command nobody allowed", acme, "shutdown -h now", "denied", "shutdown"},
		{"an unapproved program inside a substitution", acme, "echo $(id)", "denied", "command id is not allowed"},
		{"no string prefix matching", acme, "lsblk", "denied", "lsblk"},
		{"approval prefix", acme, "git push origin main", "approval_required", "approval required"},
		{"a redirect's target is judged like write-file", acme, "echo hi > x", "denied", "write to x is not allowed"},
		{"a redirect's source is judged like read-file", acme, "wc -l < secrets/db.env", "denied", "secrets/db.env is not allowed: the path is protected"},
		{"a redirect out of the workspace", globex, "cat < ../acme/x", "denied", "outside the workspace"},
		{"a redirect target that is not a literal path", globex, "echo hi > $HOME/x", "invalid_arguments", "a redirect target must be a literal path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := bash(tc.token, tc.cmd)
			if r.str("outcome") != tc.outcome || !strings.Contains(r.str("content"), tc.content) {
				t.Fatalf("got %s %q, want %s containing %q", r.str("outcome"), r.str("content"), tc.outcome, tc.content)
			}
		})
	}
	for _, ten := range []string{"acme", "globex"} {
		if b, _ := os.ReadFile(filepath.Join(h.dir, "ws", ten, "x")); string(b) != "keep me\n" {
			t.Fatalf("%s/x was touched", ten)
		}
	}
	if hits.Load() != 0 {
		t.Fatal("curl ran")
	}
	h.verify("acme")
	h.verify("globex")
}

// allowAllPack replaces the policy pack with one that offers and allows
// everything, so the run-time checks below are the only line of defence.
func allowAllPack(t testing.TB) func(*setup) {
	return func(s *setup) {
		s.policy = func(dir string) {
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				must(t, os.RemoveAll(filepath.Join(dir, e.Name())))
			}
			must(t, os.WriteFile(filepath.Join(dir, "allow.rego"), []byte(`package toolgate.availability

allow := true
`), 0o644))
			must(t, os.WriteFile(filepath.Join(dir, "authz.rego"), []byte(`package toolgate.authz

decision := {"allow": true, "reasons": ["test pack allows everything"]}
`), 0o644))
		}
	}
}

func TestBashRunsOnlyWhatWasDecided(t *testing.T) {
	t.Parallel()
	h := start(t, withAllTools, allowAllPack(t))
	dev := h.token("acme", "alice", "developer")
	bash := func(cmd string) response {
		b, _ := json.Marshal(map[string]any{"arguments": map[string]any{"command": cmd}, "session_id": "s1"})
		return h.call(dev, "bash", string(b))
	}
	// The decided segments are [["$c","hi"]]: at run time the loop execs
	// `id hi`, which policy never saw, and it is refused.
	r := bash("for c in true id; do $c hi; done")
	if r.str("outcome") != "ok" || !strings.Contains(r.str("content"), "[refused: a command that policy did not approve]") {
		t.Fatalf("unapproved program: %s", r.raw)
	}
	if refused := fmt.Sprint(r.body["data"].(map[string]any)["refused"]); !strings.Contains(refused, "id") {
		t.Fatalf("data.refused = %s", refused)
	}
	if r := bash(`eval "touch pwned"`); !strings.Contains(r.str("content"), "refused") {
		t.Fatalf("eval: %s", r.raw)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "ws/acme/pwned")); err == nil {
		t.Fatal("eval ran an unapproved command")
	}
	// Output is capped with head and tail kept.
	r = bash("seq 1 200000")
	if c := r.str("content"); !strings.Contains(c, "bytes omitted") || !strings.HasPrefix(c, "1\n2\n") || !strings.Contains(c, "200000\n") {
		t.Fatalf("truncation: %.200s", c)
	}
}

func TestCommandsRunConfined(t *testing.T) {
	t.Parallel()
	h := start(t, withAllTools, allowAllPack(t))
	r := h.do("GET", "/readyz", "", nil)
	conf, _ := r.body["confinement"].(map[string]any)
	if conf == nil || conf["mode"] != "jail" || conf["ready"] != true {
		t.Fatalf("readyz confinement %v: this machine must build the command jail", conf)
	}
	if uid, _ := conf["uid"].(float64); uid == 0 {
		t.Fatalf("jailed programs run as uid 0: %v", conf)
	}
	outside := filepath.Join(t.TempDir(), "escaped")
	dev := h.token("acme", "alice", "developer")
	b, _ := json.Marshal(map[string]any{"arguments": map[string]any{"command": "touch inside " + outside}, "session_id": "s1"})
	r = h.call(dev, "bash", string(b))
	if r.str("outcome") != "ok" || strings.Contains(r.str("content"), "[exit code: 0]") {
		t.Fatalf("touch outside the workspace should fail: %s", r.raw)
	}
	if _, err := os.Stat(outside); err == nil {
		t.Fatal("a confined command wrote outside its workspace")
	}
	if _, err := os.Stat(filepath.Join(h.dir, "ws/acme/inside")); err != nil {
		t.Fatalf("a confined command could not write inside its workspace: %v", err)
	}
}

func TestProcessesAndTasksAreScopedToTheirSession(t *testing.T) {
	t.Parallel()
	h := start(t, withAllTools, allowAllPack(t))
	alice := h.token("acme", "alice", "developer")
	bob := h.token("globex", "bob", "developer")
	call := func(tok, tool, session string, args map[string]any) response {
		b, _ := json.Marshal(map[string]any{"arguments": args, "session_id": session})
		return h.call(tok, tool, string(b))
	}
	r := call(alice, "bash", "s1", map[string]any{"command": "cat", "background": true})
	data, _ := r.body["data"].(map[string]any)
	pid, _ := data["process_id"].(string)
	if r.str("outcome") != "ok" || pid == "" {
		t.Fatalf("background start: %s", r.raw)
	}
	if r := call(alice, "process-input", "s1", map[string]any{"process_id": pid, "input": "ping\n"}); r.str("outcome") != "ok" {
		t.Fatalf("input: %s", r.raw)
	}
	r = call(alice, "process-output", "s1", map[string]any{"process_id": pid, "wait_ms": 5000})
	if !strings.Contains(r.str("content"), "ping") {
		t.Fatalf("output: %s", r.raw)
	}
	// Another session of the same tenant and another tenant see nothing.
	other := call(alice, "process-output", "s2", map[string]any{"process_id": pid})
	foreign := call(bob, "process-output", "s1", map[string]any{"process_id": pid})
	missing := call(alice, "process-output", "s1", map[string]any{"process_id": "proc_aaaaaaaaaaaaaaaa"})
	for _, x := range []response{other, foreign} {
		if x.str("outcome") != missing.str("outcome") || x.str("content") != missing.str("content") {
			t.Fatalf("a foreign process id is distinguishable from a missing one:\n%s\n%s", x.raw, missing.raw)
		}
	}
	if !strings.Contains(missing.str("content"), "not_found") {
		t.Fatalf("missing process: %s", missing.raw)
	}
	if r := call(alice, "process-stop", "s1", map[string]any{"process_id": pid, "grace_ms": 100}); r.str("outcome") != "ok" {
		t.Fatalf("stop: %s", r.raw)
	}

	r = call(alice, "task-create", "s1", map[string]any{"subject": "write the tests"})
	var task map[string]any
	must(t, json.Unmarshal([]byte(r.str("content")), &task))
	id, _ := task["id"].(string)
	if r.str("outcome") != "ok" || id == "" {
		t.Fatalf("task-create: %s", r.raw)
	}
	if r := call(alice, "task-get", "s1", map[string]any{"task_id": id}); !strings.Contains(r.str("content"), "write the tests") {
		t.Fatalf("task-get: %s", r.raw)
	}
	other = call(alice, "task-get", "s2", map[string]any{"task_id": id})
	foreign = call(bob, "task-get", "s1", map[string]any{"task_id": id})
	missing = call(alice, "task-get", "s1", map[string]any{"task_id": "task_aaaaaaaaaaaa"})
	for _, x := range []response{other, foreign} {
		if x.str("content") != missing.str("content") || !strings.Contains(x.str("content"), "not_found") {
			t.Fatalf("a foreign task id is distinguishable from a missing one:\n%s\n%s", x.raw, missing.raw)
		}
	}
	if r := call(alice, "task-list", "", map[string]any{}); r.str("outcome") != "invalid_arguments" {
		t.Fatalf("task-list without a session: %s", r.raw)
	}
}
