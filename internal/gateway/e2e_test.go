package gateway

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/golang-jwt/jwt/v5"
)

func TestWalkThroughFromTheReadme(t *testing.T) {
	t.Parallel()
	h := start(t)
	dev := h.token("acme", "alice", "developer")

	// The tool list follows the availability policy, in declaration order.
	for _, tc := range []struct {
		token string
		want  []string
	}{
		{dev, []string{"read-file", "write-file", "edit-file", "glob", "grep"}},
		{h.token("acme", "vera", "viewer"), []string{"read-file", "glob", "grep"}},
		{h.token("acme", "nobody"), nil},
	} {
		r := h.do("GET", "/v1/tools", tc.token, nil)
		var got []string
		for _, tl := range r.body["tools"].([]any) {
			tool := tl.(map[string]any)
			got = append(got, tool["name"].(string))
			if tool["input_schema"].(map[string]any)["type"] != "object" {
				t.Errorf("tool %v: input_schema is not an object schema", tool["name"])
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("tools = %v, want %v", got, tc.want)
		}
	}

	r := h.call(dev, "read-file", `{"arguments":{"path":"docs/guide.md"},"session_id":"s-1"}`)
	if r.status != 200 || r.str("outcome") != "ok" || r.body["is_error"] != false ||
		r.str("content") != "     1\tacme guide\n     2\tline two\n" {
		t.Fatalf("read-file: %d %s", r.status, r.raw)
	}
	callID := r.str("call_id")

	r = h.call(dev, "read-file", `{"arguments":{"path":"secrets/db.env"}}`)
	if r.str("outcome") != "denied" || r.body["is_error"] != true || strings.Contains(string(r.raw), "PASSWORD") || r.str("content") == "" {
		t.Fatalf("protected read: %s", r.raw)
	}

	r = h.call(dev, "write-file", `{"arguments":{"path":"notes/new.txt","content":"hello"}}`)
	if r.str("outcome") != "ok" || r.str("content") != "wrote 5 bytes to notes/new.txt" {
		t.Fatalf("write-file: %s", r.raw)
	}
	if b, _ := os.ReadFile(filepath.Join(h.dir, "ws/acme/notes/new.txt")); string(b) != "hello" {
		t.Fatalf("file content %q", b)
	}

	r = h.call(dev, "write-file", `{"arguments":{"path":"release/VERSION","content":"2"}}`)
	if r.str("outcome") != "approval_required" || r.str("content") != "approval required" {
		t.Fatalf("approval write: %s", r.raw)
	}
	if b, _ := os.ReadFile(filepath.Join(h.dir, "ws/acme/release/VERSION")); string(b) != "1\n" {
		t.Fatal("a call that needs approval ran")
	}

	// The audit log has the decision and the result of the first call,
	// with the masked request document and the policy revision.
	evs := h.events("acme", "call_id="+callID)
	if len(evs) != 2 || evs[0]["phase"] != "result" || evs[1]["phase"] != "decision" || evs[1]["outcome"] != "allow" {
		t.Fatalf("events for %s: %v", callID, evs)
	}
	if evs[1]["request_digest"] != evs[1]["input"].(map[string]any)["digest"] || evs[1]["policy_revision"] == "" {
		t.Fatalf("decision event lacks digest or revision: %v", evs[1])
	}
	// write-file content is masked in the log.
	w := h.events("acme", "tool=write-file&phase=decision&limit=1")[0]
	if w["input"].(map[string]any)["args"].(map[string]any)["content"] != "**masked**" {
		t.Fatalf("write-file content not masked: %v", w["input"])
	}
	if n := h.verify("acme"); n != 6 {
		t.Fatalf("verified %d events, want 6: read (decision+result), denied, write (decision+result), approval", n)
	}
}

func TestBadInputIsRefusedPreciselyAndNothingRuns(t *testing.T) {
	t.Parallel()
	h := start(t)
	dev := h.token("acme", "alice", "developer")
	expired, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "alice", "tenant": "acme", "roles": []string{"developer"}, "exp": time.Now().Add(-time.Hour).Unix(),
	}).SignedString(h.secret)
	forged, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{
		"sub": "alice", "tenant": "acme", "roles": []string{"developer"}, "exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString([]byte("an attacker's secret that is long enough"))
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{
		"sub": "alice", "tenant": "acme", "exp": time.Now().Add(time.Hour).Unix(),
	}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	foreignTenant := h.token("initech", "alice", "developer")
	controlSub := h.token("acme", "ali\x00ce", "developer")

	type tc struct {
		name    string
		token   string
		tool    string
		body    string
		status  int
		outcome string // for 200s
		code    string // for errors
		content string // substring of content, for 200s
	}
	const wf = "write-file"
	cases := []tc{
		{"duplicate argument names", dev, wf, `{"arguments":{"path":"notes/x","path":"notes/y","content":"x"}}`, 200, "invalid_arguments", "", "/path: duplicate member name"},
		{"case-variant name", dev, wf, `{"arguments":{"Path":"notes/x","content":"x"}}`, 200, "invalid_arguments", "", "/Path: unknown argument"},
		{"unknown argument", dev, wf, `{"arguments":{"path":"notes/x","content":"x","mode":"0777"}}`, 200, "invalid_arguments", "", "/mode: unknown argument"},
		{"invalid UTF-8 in arguments", dev, wf, "{\"arguments\":{\"path\":\"notes/\xff\",\"content\":\"x\"}}", 200, "invalid_arguments", "", "invalid UTF-8"},
		{"deep nesting", dev, wf, `{"arguments":{"path":"notes/x","content":"x","z":` + strings.Repeat(`{"a":`, 40) + `1` + strings.Repeat(`}`, 40) + `}}`, 200, "invalid_arguments", "", "nested more than 32 levels"},
		{"null arguments", dev, wf, `{"arguments":null}`, 200, "invalid_arguments", "", "must be a JSON object"},
		{"array arguments", dev, wf, `{"arguments":["notes/x","x"]}`, 200, "invalid_arguments", "", "must be a JSON object"},
		{"null required field", dev, wf, `{"arguments":{"path":null,"content":"x"}}`, 200, "invalid_arguments", "", "/path: must be string, not null"},
		{"absent required field", dev, wf, `{"arguments":{"path":"notes/x"}}`, 200, "invalid_arguments", "", "/content: missing required argument"},
		{"dot-dot escape", dev, wf, `{"arguments":{"path":"notes/../../x","content":"x"}}`, 200, "invalid_arguments", "", "/path: "},
		{"absolute path", dev, wf, `{"arguments":{"path":"/etc/passwd","content":"x"}}`, 200, "invalid_arguments", "", "/path: "},
		{"NUL byte", dev, wf, `{"arguments":{"path":"notes/a\u0000b","content":"x"}}`, 200, "invalid_arguments", "", "/path: "},
		{"symlink escape read", dev, "read-file", `{"arguments":{"path":"escape/secret.txt"}}`, 200, "invalid_arguments", "", "/path: "},
		{"symlink escape write", dev, wf, `{"arguments":{"path":"escape/pwned.txt","content":"x"}}`, 200, "invalid_arguments", "", "/path: "},
		{"absolute symlink", dev, "read-file", `{"arguments":{"path":"abs-link"}}`, 200, "invalid_arguments", "", "/path: "},
		{"envelope names a tenant", dev, wf, `{"tenant":"globex","arguments":{"path":"notes/x","content":"x"}}`, 400, "", "invalid_request", ""},
		{"envelope names a principal", dev, wf, `{"principal":"root","arguments":{"path":"notes/x","content":"x"}}`, 400, "", "invalid_request", ""},
		{"duplicate envelope member", dev, wf, `{"arguments":{"path":"notes/x","content":"x"},"arguments":{}}`, 400, "", "invalid_request", ""},
		{"body is null", dev, wf, `null`, 400, "", "invalid_request", ""},
		{"body is an array", dev, wf, `[{"arguments":{}}]`, 400, "", "invalid_request", ""},
		{"body is not JSON", dev, wf, `{"arguments":`, 400, "", "invalid_request", ""},
		{"trailing data", dev, wf, `{"arguments":{"path":"notes/x","content":"x"}} {}`, 400, "", "invalid_request", ""},
		{"session_id not a string", dev, wf, `{"session_id":5,"arguments":{"path":"notes/x","content":"x"}}`, 400, "", "invalid_request", ""},
		{"session_id with spaces", dev, wf, `{"session_id":"a b","arguments":{"path":"notes/x","content":"x"}}`, 400, "", "invalid_request", ""},
		{"oversized body", dev, wf, `{"arguments":{"path":"notes/x","content":"` + strings.Repeat("x", 70000) + `"}}`, 413, "", "too_large", ""},
		{"missing token", "", wf, `{"arguments":{"path":"notes/x","content":"x"}}`, 401, "", "unauthenticated", ""},
		{"expired token", expired, wf, `{"arguments":{"path":"notes/x","content":"x"}}`, 401, "", "unauthenticated", ""},
		{"forged token", forged, wf, `{"arguments":{"path":"notes/x","content":"x"}}`, 401, "", "unauthenticated", ""},
		{"alg none token", none, wf, `{"arguments":{"path":"notes/x","content":"x"}}`, 401, "", "unauthenticated", ""},
		{"token of an unknown tenant", foreignTenant, wf, `{"arguments":{"path":"notes/x","content":"x"}}`, 401, "", "unauthenticated", ""},
		{"principal with a NUL byte", controlSub, wf, `{"arguments":{"path":"notes/x","content":"x"}}`, 401, "", "unauthenticated", ""},
		{"garbage token", "not-a-key", wf, `{"arguments":{"path":"notes/x","content":"x"}}`, 401, "", "unauthenticated", ""},
		{"unknown tool", dev, "format-disk", `{"arguments":{}}`, 200, "unavailable", "", "tool unavailable"},
		{"invalid tool name", dev, "Read_File", `{"arguments":{}}`, 200, "unavailable", "", "tool unavailable"},
	}
	before := h.snapshot()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := h.call(c.token, c.tool, c.body)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.raw)
			}
			if c.status == 200 {
				if r.str("outcome") != c.outcome || !strings.Contains(r.str("content"), c.content) || r.body["is_error"] != true {
					t.Fatalf("got %s %q, want %s containing %q", r.str("outcome"), r.str("content"), c.outcome, c.content)
				}
				if strings.Contains(r.str("content"), h.dir) {
					t.Fatal("a host path reached the model")
				}
			} else if r.errCode() != c.code {
				t.Fatalf("error code %q, want %q: %s", r.errCode(), c.code, r.raw)
			}
			if c.status == 401 && r.header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
		})
	}
	h.assertUnchanged(before)
	// Every 200 above was audited; the log still verifies.
	audited := 0
	for _, c := range cases {
		if c.status == 200 {
			audited++
		}
	}
	if n := h.verify("acme"); n != audited {
		t.Fatalf("audited %d events, want %d", n, audited)
	}
	if got := len(h.events("acme", "outcome=invalid_arguments&limit=1000")); got != audited-2 {
		t.Fatalf("invalid_arguments events = %d, want %d", got, audited-2)
	}
}

func TestUnknownAndHiddenToolsAreIndistinguishable(t *testing.T) {
	t.Parallel()
	h := start(t)
	viewer := h.token("acme", "vera", "viewer")
	hidden := h.call(viewer, "write-file", `{"arguments":{"path":"docs/x","content":"x"}}`)
	unknown := h.call(viewer, "delete-everything", `{"arguments":{"path":"docs/x","content":"x"}}`)
	strip := func(r response) string {
		m := map[string]any{}
		for k, v := range r.body {
			if k != "call_id" && k != "decision_id" {
				m[k] = v
			}
		}
		keys := make([]string, 0, len(r.header))
		for k := range r.header {
			if k != "Date" && k != "Content-Length" && k != "X-Request-Id" { // per request by design
				keys = append(keys, k+"="+r.header.Get(k))
			}
		}
		sort.Strings(keys)
		return fmt.Sprint(r.status, m, keys)
	}
	if strip(hidden) != strip(unknown) {
		t.Fatalf("hidden and unknown tools differ:\n%s\n%s", strip(hidden), strip(unknown))
	}
	if hidden.str("outcome") != "unavailable" || hidden.str("content") != "tool unavailable" {
		t.Fatalf("hidden tool: %s", hidden.raw)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "ws/acme/docs/x")); err == nil {
		t.Fatal("a hidden tool ran")
	}
	// Arguments of an unavailable tool are never decoded: even malformed
	// ones give unavailable.
	r := h.call(viewer, "write-file", `{"arguments":{"path":1,"path":2}}`)
	if r.str("outcome") != "unavailable" {
		t.Fatalf("arguments of a hidden tool were decoded: %s", r.raw)
	}
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	h := start(t)
	a := h.token("acme", "alice", "developer")
	b := h.token("globex", "bob", "developer")

	// Same relative path, each tenant's own file.
	if r := h.call(b, "read-file", `{"arguments":{"path":"docs/guide.md"}}`); !strings.Contains(r.str("content"), "globex guide") {
		t.Fatalf("globex read: %s", r.raw)
	}
	if r := h.call(a, "read-file", `{"arguments":{"path":"docs/guide.md"}}`); !strings.Contains(r.str("content"), "acme guide") {
		t.Fatalf("acme read: %s", r.raw)
	}
	// globex may write anywhere in its own workspace, never into acme's.
	if r := h.call(b, "write-file", `{"arguments":{"path":"docs/guide.md","content":"globex was here"}}`); r.str("outcome") != "ok" {
		t.Fatalf("globex write: %s", r.raw)
	}
	if r := h.call(b, "read-file", `{"arguments":{"path":"../acme/docs/guide.md"}}`); r.str("outcome") != "invalid_arguments" {
		t.Fatalf("cross-workspace path: %s", r.raw)
	}
	if b, _ := os.ReadFile(filepath.Join(h.dir, "ws/acme/docs/guide.md")); string(b) != "acme guide\nline two\n" {
		t.Fatal("tenant B's write reached tenant A's workspace")
	}
	// glob in globex lists only globex files.
	if r := h.call(b, "glob", `{"arguments":{"pattern":"**/*"}}`); strings.Contains(r.str("content"), "secrets") || strings.Contains(r.str("content"), "app.py") {
		t.Fatalf("globex glob sees acme files: %s", r.raw)
	}

	// Auditors see only their tenant.
	aEvents := h.events("acme", "limit=1000")
	bEvents := h.events("globex", "limit=1000")
	if len(aEvents) == 0 || len(bEvents) == 0 {
		t.Fatal("expected events in both tenants")
	}
	for _, e := range bEvents {
		if e["tenant"] != "globex" {
			t.Fatalf("globex auditor saw %v", e)
		}
	}
	bAuditor := h.token("globex", "eve", "auditor")
	aID := aEvents[0]["id"].(string)
	if r := h.do("GET", "/v1/audit/events/"+aID, bAuditor, nil); r.status != 404 || r.errCode() != "not_found" {
		t.Fatalf("globex auditor fetched an acme event: %d %s", r.status, r.raw)
	}
	missing := h.do("GET", "/v1/audit/events/00000000-0000-7000-8000-000000000000", bAuditor, nil)
	foreign := h.do("GET", "/v1/audit/events/"+aID, bAuditor, nil)
	if string(missing.raw) != string(foreign.raw) {
		t.Fatal("another tenant's event is distinguishable from a missing one")
	}
	if r := h.do("GET", "/v1/audit/events/"+aID, h.token("acme", "ann", "auditor"), nil); r.status != 200 || r.str("id") != aID {
		t.Fatalf("acme auditor: %d %s", r.status, r.raw)
	}
	// A cursor from one tenant is refused in another.
	page := h.do("GET", "/v1/audit/events?limit=1", h.token("acme", "ann", "auditor"), nil)
	if cur := page.str("next_cursor"); cur != "" {
		if r := h.do("GET", "/v1/audit/events?limit=1&cursor="+cur, bAuditor, nil); r.status != 400 {
			t.Fatalf("foreign cursor: %d %s", r.status, r.raw)
		}
	}
	if h.verify("acme") != len(aEvents) || h.verify("globex") != len(bEvents) {
		t.Fatal("verify counts do not match each tenant's own events")
	}
}

func TestManagementRoutesNeedTheirRoles(t *testing.T) {
	t.Parallel()
	h := start(t)
	dev := h.token("acme", "alice", "developer")
	for _, p := range []string{"/v1/audit/events", "/v1/audit/events/x", "/v1/audit/verify", "/v1/policy"} {
		if r := h.do("GET", p, dev, nil); r.status != 403 || r.errCode() != "forbidden" {
			t.Errorf("%s without role: %d %s", p, r.status, r.raw)
		}
		if r := h.do("GET", p, "", nil); r.status != 401 {
			t.Errorf("%s without token: %d", p, r.status)
		}
	}
	r := h.do("GET", "/v1/policy", h.token("acme", "pat", "policy-admin"), nil)
	if r.status != 200 || !strings.HasPrefix(r.str("revision"), "sha256:") || len(r.body["modules"].([]any)) == 0 {
		t.Fatalf("policy: %d %s", r.status, r.raw)
	}
	aud := h.token("acme", "ann", "auditor")
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "from=yesterday", "cursor=garbage", "bogus=1", "tool=a&tool=b", "from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z"} {
		if r := h.do("GET", "/v1/audit/events?"+q, aud, nil); r.status != 400 || r.errCode() != "invalid_request" {
			t.Errorf("audit query %q: %d %s", q, r.status, r.raw)
		}
	}
}

func TestDecisionsEndpointRunsNothing(t *testing.T) {
	t.Parallel()
	h := start(t)
	dev := h.token("acme", "alice", "developer")
	before := h.snapshot()
	r := h.do("POST", "/v1/tools/write-file/decisions", dev, []byte(`{"arguments":{"path":"notes/pdp.txt","content":"x"},"call_id":"pdp-1"}`))
	if r.status != 200 || r.str("outcome") != "allow" || !strings.HasPrefix(r.str("request_digest"), "sha256:") {
		t.Fatalf("decision: %d %s", r.status, r.raw)
	}
	h.assertUnchanged(before)
	evs := h.events("acme", "call_id=pdp-1")
	if len(evs) != 1 || evs[0]["phase"] != "decision" || evs[0]["request_digest"] != r.str("request_digest") {
		t.Fatalf("PDP decision audit: %v", evs)
	}
	for body, want := range map[string]string{
		`{"arguments":{"path":"secrets/k","content":"x"}}`: "denied",
		`{"arguments":{"path":"../k","content":"x"}}`:      "invalid_arguments",
		`{"arguments":{"path":"release/k","content":"x"}}`: "approval_required",
	} {
		if r := h.do("POST", "/v1/tools/write-file/decisions", dev, []byte(body)); r.str("outcome") != want {
			t.Errorf("%s: %s, want %s", body, r.raw, want)
		}
	}
	if r := h.do("POST", "/v1/tools/write-file/decisions", h.token("acme", "vera", "viewer"), []byte(`{}`)); r.str("outcome") != "unavailable" {
		t.Errorf("viewer decision: %s", r.raw)
	}
	h.assertUnchanged(before)
}

func TestHotReloadUnderConcurrentLoad(t *testing.T) {
	t.Parallel()
	h := start(t)
	admin := h.token("acme", "pat", "policy-admin")
	dev := h.token("acme", "alice", "developer")
	rev0 := h.do("GET", "/v1/policy", admin, nil).str("revision")

	var stop atomic.Bool
	var calls, failures atomic.Int64
	var firstFailure atomic.Value
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop.Store(true) // also when a check below fails
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				r := h.call(dev, "read-file", `{"arguments":{"path":"docs/guide.md"}}`)
				calls.Add(1)
				if r.status != 200 || r.str("outcome") != "ok" {
					failures.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("%d %s", r.status, r.raw))
				}
			}
		}()
	}
	data := filepath.Join(h.dir, "policies", "data.yaml")
	orig, err := os.ReadFile(data)
	must(t, err)
	waitPolicy := func(what string, cond func(r response) bool) response {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			r := h.do("GET", "/v1/policy", admin, nil)
			if cond(r) {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s: %s", what, r.raw)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// Several good revisions while calls are in flight.
	last := rev0
	for i := 1; i <= 5; i++ {
		must(t, os.WriteFile(data, append(append([]byte{}, orig...), fmt.Sprintf("\nreload_marker: %d\n", i)...), 0o644))
		r := waitPolicy("a new revision", func(r response) bool { return r.str("revision") != last })
		last = r.str("revision")
	}
	// A broken module never replaces the good revision.
	broken := filepath.Join(h.dir, "policies", "broken.rego")
	must(t, os.WriteFile(broken, []byte("package toolgate.authz\n\ndecision := {\"allow\": true\n"), 0o644))
	r := waitPolicy("the reload error", func(r response) bool { return r.body["last_error"] != nil })
	if r.str("revision") != last {
		t.Fatalf("a broken policy replaced revision %s with %s", last, r.str("revision"))
	}
	if msg := r.body["last_error"].(map[string]any)["message"].(string); !strings.Contains(msg, "broken.rego") || strings.Contains(msg, h.dir) {
		t.Fatalf("last_error should name the file but no host path: %q", msg)
	}
	// Calls keep being served while the broken module is there.
	served := calls.Load()
	waitFor(t, "calls served beside the broken module", func() bool { return calls.Load() >= served+3 })
	must(t, os.Remove(broken))
	waitPolicy("the error to clear", func(r response) bool { return r.body["last_error"] == nil })

	stop.Store(true)
	wg.Wait()
	if failures.Load() != 0 {
		t.Fatalf("%d of %d calls failed during reloads; first: %v", failures.Load(), calls.Load(), firstFailure.Load())
	}
	if calls.Load() < 8 {
		t.Fatalf("only %d calls ran during the reloads", calls.Load())
	}
	h.verify("acme")
}

func TestFailClosedWhenNoPolicyLoads(t *testing.T) {
	t.Parallel()
	h := start(t, func(s *setup) {
		s.policy = func(dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "broken.rego"), []byte("package toolgate.authz\n\nthis is not rego\n"), 0o644))
		}
	})
	before := h.snapshot()
	dev := h.token("acme", "alice", "developer")
	r := h.call(dev, "write-file", `{"arguments":{"path":"notes/x","content":"x"}}`)
	if r.status != 503 || r.errCode() != "unavailable" {
		t.Fatalf("call without policy: %d %s", r.status, r.raw)
	}
	if r := h.do("GET", "/v1/tools", dev, nil); r.status != 503 {
		t.Fatalf("tools without policy: %d %s", r.status, r.raw)
	}
	if r := h.do("GET", "/readyz", "", nil); r.status != 503 || r.body["checks"].(map[string]any)["policy"] != "not loaded" {
		t.Fatalf("readyz: %d %s", r.status, r.raw)
	}
	h.assertUnchanged(before)
	// Fixing the policy makes the gateway ready without a restart.
	must(t, os.Remove(filepath.Join(h.dir, "policies", "broken.rego")))
	deadline := time.Now().Add(20 * time.Second)
	for h.do("GET", "/readyz", "", nil).status != 200 {
		if time.Now().After(deadline) {
			t.Fatal("gateway did not become ready after the policy was fixed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r := h.call(dev, "read-file", `{"arguments":{"path":"docs/guide.md"}}`); r.str("outcome") != "ok" {
		t.Fatalf("after fix: %s", r.raw)
	}
}

func TestFailClosedWhenPolicyEvaluationErrors(t *testing.T) {
	t.Parallel()
	h := start(t, func(s *setup) {
		s.policy = func(dir string) {
			// A builtin error inside the decision: strict builtin errors make
			// it an evaluation error instead of a silently undefined rule.
			must(t, os.WriteFile(filepath.Join(dir, "zz_strict.rego"), []byte(`package toolgate.authz

deny contains "never" if to_number(input.args.content) > 1
`), 0o644))
		}
	})
	before := h.snapshot()
	dev := h.token("acme", "alice", "developer")
	r := h.call(dev, "write-file", `{"arguments":{"path":"notes/x","content":"not a number"}}`)
	if r.status != 503 || r.errCode() != "unavailable" || strings.Contains(string(r.raw), "to_number") {
		t.Fatalf("eval error: %d %s", r.status, r.raw)
	}
	h.assertUnchanged(before)
	metrics := h.do("GET", "/metrics", "", nil)
	if !strings.Contains(string(metrics.raw), `toolgate_fail_closed_total{cause="policy"} 1`) {
		t.Fatal("fail-closed not counted in metrics")
	}
}

func TestFailClosedWhenTheAuditStoreIsDown(t *testing.T) {
	t.Parallel()
	h := start(t)
	dev := h.token("acme", "alice", "developer")
	if r := h.call(dev, "read-file", `{"arguments":{"path":"docs/guide.md"}}`); r.str("outcome") != "ok" {
		t.Fatalf("warm-up: %s", r.raw)
	}
	before := h.snapshot()
	h.g.db.Close() // the database goes away underneath the gateway
	r := h.call(dev, "write-file", `{"arguments":{"path":"notes/x","content":"x"}}`)
	if r.status != 503 || r.errCode() != "unavailable" {
		t.Fatalf("call with audit down: %d %s", r.status, r.raw)
	}
	if r := h.do("GET", "/readyz", "", nil); r.status != 503 || r.body["checks"].(map[string]any)["audit"] != "unreachable" {
		t.Fatalf("readyz: %d %s", r.status, r.raw)
	}
	h.assertUnchanged(before)
}

func TestOperationsEndpoints(t *testing.T) {
	t.Parallel()
	h := start(t)
	if r := h.do("GET", "/healthz", "", nil); r.status != 200 {
		t.Fatal("healthz")
	}
	if r := h.do("GET", "/readyz", "", nil); r.status != 200 || r.str("status") != "ready" {
		t.Fatalf("readyz: %s", r.raw)
	}
	h.call("bad-token", "read-file", `{}`)
	dev := h.token("acme", "alice", "developer")
	h.call(dev, "read-file", `{"arguments":{"path":"docs/guide.md"}}`)
	for i := range 3 { // names nobody configured all count as "unknown"
		h.call(dev, fmt.Sprintf("made-up-%d", i), `{}`)
	}
	m := string(h.do("GET", "/metrics", "", nil).raw)
	for _, want := range []string{"toolgate_unauthenticated_total", "toolgate_policy_reloads_total", "toolgate_audit_appends_total", "toolgate_http_requests_total",
		`toolgate_calls_total{mode="call",outcome="ok",tool="read-file"} 1`,
		`toolgate_calls_total{mode="call",outcome="unavailable",tool="unknown"} 3`,
		`toolgate_stage_duration_seconds_count{stage="auth"}`,
		`toolgate_stage_duration_seconds_count{stage="audit"}`,
		`toolgate_stage_duration_seconds_count{stage="invoke"}`,
		`toolgate_audit_batch_size_count`, `toolgate_audit_commit_seconds_count`, `toolgate_audit_queue_depth`,
		`toolgate_policy_revision_info`, `toolgate_policy_decision_cache_total`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(m, "acme") {
		t.Error("metrics reveal tenant names")
	}
	if strings.Contains(m, "made-up") {
		t.Error("a caller-chosen tool name became a label value")
	}
	if r := h.do("GET", "/v1/nope", h.token("acme", "a"), nil); r.status != 404 {
		t.Errorf("unknown route: %d", r.status)
	}
}

// Every route the server serves is in api/openapi.yaml, and every
// documented operation is served.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	t.Parallel()
	h := start(t)
	var served []string
	err := chi.Walk(h.g.handler.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if route == "/console" || strings.HasPrefix(route, "/console/") {
			// The web console serves HTML pages and forms to browsers, not
			// the JSON API: its routes are docs/console.md "Console".
			return nil
		}
		served = append(served, method+" "+strings.TrimSuffix(route, "/"))
		return nil
	})
	must(t, err)
	sort.Strings(served)
	if fmt.Sprint(served) != fmt.Sprint(h.spec.Operations()) {
		t.Fatalf("served routes and OpenAPI operations differ:\nserved:  %v\ndocumented: %v", served, h.spec.Operations())
	}
}
