package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolgate/toolgate/internal/pgtest"
	"github.com/toolgate/toolgate/sdk/client"
)

// obligationsLine is the rule of the shipped pack that the tests below
// extend with their own rate_limit obligation.
const obligationsLine = "obligations := object.union_n([time_limit, output_cap, exclusions, jail, rate_limits])"

// withRateLimits adds rules (Rego of package toolgate.authz defining the
// object test_limits) to the shipped pack's obligations.
func withRateLimits(t testing.TB, rules string) func(*setup) {
	return func(s *setup) {
		s.policy = func(dir string) {
			f := filepath.Join(dir, "authz.rego")
			b, err := os.ReadFile(f)
			must(t, err)
			if !strings.Contains(string(b), obligationsLine) {
				t.Fatalf("authz.rego has no line %q to extend", obligationsLine)
			}
			patched := strings.Replace(string(b), obligationsLine,
				"obligations := object.union_n([time_limit, output_cap, exclusions, jail, rate_limits, test_limits])", 1)
			must(t, os.WriteFile(f, []byte(patched), 0o644))
			must(t, os.WriteFile(filepath.Join(dir, "test_limits.rego"), []byte("package toolgate.authz\n\n"+rules), 0o644))
		}
	}
}

// perPrincipalWrites limits write-file to 2 calls per principal and tenant,
// with a refill so slow (one token every 1000 s) that no test sees it.
const perPrincipalWrites = `default test_limits := {}

test_limits := {"rate_limit": {"key": sprintf("%s/%s", [input.principal.id, input.tool.name]), "rate": 0.001, "burst": 2}} if {
	input.tool.name == "write-file"
}
`

func writeBody(path string) string {
	return `{"arguments":{"path":"` + path + `","content":"x"}}`
}

// retryAfter reads a 429's Retry-After: whole seconds, at least 1.
func retryAfter(t testing.TB, r response) int {
	t.Helper()
	v := r.header.Get("Retry-After")
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("Retry-After %q is not a positive whole number of seconds", v)
	}
	return n
}

// metric reads one sample of the gateway's /metrics.
func (h *harness) metric(name string) float64 {
	h.t.Helper()
	m := string(h.do("GET", "/metrics", "", nil).raw)
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`)
	g := re.FindStringSubmatch(m)
	if g == nil {
		return 0
	}
	f, err := strconv.ParseFloat(g[1], 64)
	if err != nil {
		h.t.Fatal(err)
	}
	return f
}

func (h *harness) exists(rel string) bool {
	_, err := os.Stat(filepath.Join(h.dir, "ws", filepath.FromSlash(rel)))
	return err == nil
}

// A call over its policy-chosen limit is not run: 429 rate_limited with a
// sane Retry-After, a decision event with outcome rate_limited, a metric
// without the key. Other keys and other tenants keep their own buckets.
func TestRateLimitObligationRefusesAndAudits(t *testing.T) {
	t.Parallel()
	h := start(t, withRateLimits(t, perPrincipalWrites))
	alice := h.token("acme", "alice", "developer")
	for _, p := range []string{"notes/a.txt", "notes/b.txt"} {
		if r := h.call(alice, "write-file", writeBody(p)); r.status != 200 || r.str("outcome") != "ok" {
			t.Fatalf("write %s within the burst: %d %s", p, r.status, r.raw)
		}
	}
	r := h.call(alice, "write-file", writeBody("notes/c.txt"))
	if r.status != 429 || r.errCode() != "rate_limited" {
		t.Fatalf("third write: %d %s, want 429 rate_limited", r.status, r.raw)
	}
	if n := retryAfter(t, r); n < 900 || n > 1000 {
		t.Fatalf("Retry-After %d, want about 1000 (the next token of a 0.001/s bucket)", n)
	}
	if strings.Contains(string(r.raw), "alice/write-file") {
		t.Fatalf("the response names the policy's key: %s", r.raw)
	}
	e := r.body["error"].(map[string]any)
	callID, _ := e["call_id"].(string)
	if callID == "" || e["decision_id"] == nil {
		t.Fatalf("429 names no call_id and decision_id: %s", r.raw)
	}
	if h.exists("acme/notes/c.txt") {
		t.Fatal("the rate-limited write ran")
	}
	evs := h.events("acme", "call_id="+callID)
	if len(evs) != 1 || evs[0]["phase"] != "decision" || evs[0]["outcome"] != "rate_limited" || evs[0]["decision_id"] != e["decision_id"] {
		t.Fatalf("audit events of the refused call: %v", evs)
	}
	if reasons := evs[0]["reasons"].([]any); len(reasons) == 0 || !strings.Contains(reasons[0].(string), `rate limit "alice/write-file" exceeded`) {
		t.Fatalf("reasons of the refused call: %v", reasons)
	}
	if _, ok := evs[0]["approval"]; ok {
		t.Fatalf("a rate-limited call carries an approval: %v", evs[0])
	}
	if got := h.metric(`toolgate_rate_limited_total{limit="policy"}`); got != 1 {
		t.Fatalf(`toolgate_rate_limited_total{limit="policy"} = %v, want 1`, got)
	}
	if m := string(h.do("GET", "/metrics", "", nil).raw); strings.Contains(m, "alice/write-file") {
		t.Fatal("a metric label carries the policy's key")
	}

	// Reads carry no limit; another principal and another tenant have
	// buckets of their own.
	if r := h.call(alice, "read-file", `{"arguments":{"path":"docs/guide.md"}}`); r.status != 200 || r.str("outcome") != "ok" {
		t.Fatalf("read by alice: %d %s", r.status, r.raw)
	}
	bob := h.token("acme", "bob", "developer")
	if r := h.call(bob, "write-file", writeBody("notes/bob.txt")); r.status != 200 || r.str("outcome") != "ok" {
		t.Fatalf("bob's write: %d %s", r.status, r.raw)
	}
	galice := h.token("globex", "alice", "developer")
	if r := h.call(galice, "write-file", writeBody("notes/g.txt")); r.status != 200 || r.str("outcome") != "ok" {
		t.Fatalf("globex alice's write: %d %s", r.status, r.raw)
	}

	// A PDP decision takes a token as a call does: bob's second token
	// goes to a decision, and his next call is refused.
	if r := h.do("POST", "/v1/tools/write-file/decisions", bob, []byte(writeBody("notes/d.txt"))); r.status != 200 || r.str("outcome") != "allow" {
		t.Fatalf("bob's decision: %d %s", r.status, r.raw)
	}
	if r := h.do("POST", "/v1/tools/write-file/decisions", bob, []byte(writeBody("notes/d.txt"))); r.status != 429 || r.errCode() != "rate_limited" {
		t.Fatalf("bob's decision over the limit: %d %s", r.status, r.raw)
	}
	// In a batch, the refused call is one result among others.
	b := h.do("POST", "/v1/batches", alice, []byte(`{"calls":[
		{"tool":"read-file","arguments":{"path":"docs/guide.md"}},
		{"tool":"write-file","arguments":{"path":"notes/e.txt","content":"x"}}]}`))
	if b.status != 200 {
		t.Fatalf("batch: %d %s", b.status, b.raw)
	}
	res := b.body["results"].([]any)
	first, second := res[0].(map[string]any), res[1].(map[string]any)
	data, _ := second["data"].(map[string]any)
	if first["outcome"] != "ok" || second["outcome"] != "rate_limited" || second["content"] != "rate limited" || second["is_error"] != true || data["retry_after"] == nil {
		t.Fatalf("batch results: %s", b.raw)
	}
	// The SDK reports the refusal as a typed error with its Retry-After.
	c, err := client.New(h.base, alice)
	must(t, err)
	_, err = c.Call(context.Background(), "write-file", map[string]any{"path": "notes/sdk.txt", "content": "x"}, nil)
	wait, limited := client.IsRateLimited(err)
	var ce *client.Error
	if !limited || wait < 900*time.Second || wait > 1000*time.Second || !errors.As(err, &ce) || ce.CallID == "" || ce.DecisionID == "" {
		t.Fatalf("SDK call over the limit: %v (rate limited %v, retry after %v)", err, limited, wait)
	}
	if _, limited := client.IsRateLimited(nil); limited {
		t.Fatal("IsRateLimited(nil)")
	}
	if h.exists("acme/notes/e.txt") || h.exists("acme/notes/d.txt") || h.exists("acme/notes/sdk.txt") {
		t.Fatal("a refused or decided-only write ran")
	}
	h.verify("acme")
}

// A bucket refills at its rate: after Retry-After seconds the call runs.
// Nothing here depends on how fast the machine is: the gateway's clock
// stands still until the test moves it, so the bucket refills only then.
func TestRateLimitRefills(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	h := start(t, withRateLimits(t, `default test_limits := {}

test_limits := {"rate_limit": [{"key": "writes", "rate": 2, "burst": 1}]} if input.tool.name == "write-file"
`), func(s *setup) { s.clock = clock })
	alice := h.token("acme", "alice", "developer")
	var refused response
	for i := 0; ; i++ {
		if i == 50 {
			t.Fatal("50 writes in a row passed a bucket of 1 refilled twice a second")
		}
		r := h.call(alice, "write-file", writeBody("notes/n"+strconv.Itoa(i)+".txt"))
		if r.status == 429 {
			refused = r
			break
		}
		if r.status != 200 || r.str("outcome") != "ok" {
			t.Fatalf("write %d: %d %s", i, r.status, r.raw)
		}
	}
	if n := retryAfter(t, refused); n != 1 {
		t.Fatalf("Retry-After %d, want 1 (half a second, rounded up)", n)
	}
	clock.Advance(400 * time.Millisecond) // not yet refilled
	if r := h.call(alice, "write-file", writeBody("notes/early.txt")); r.status != 429 {
		t.Fatalf("write 0.4 s after the refusal: %d %s, want 429", r.status, r.raw)
	}
	clock.Advance(600 * time.Millisecond)
	if r := h.call(alice, "write-file", writeBody("notes/after.txt")); r.status != 200 || r.str("outcome") != "ok" {
		t.Fatalf("write after Retry-After: %d %s", r.status, r.raw)
	}
}

// A call refused by a limit did not run, so its call_id keeps no recorded
// response: the retry the 429 asks for, with the same call_id after
// Retry-After, is decided again and runs (it is not answered the recorded
// 429 for the key's whole TTL). The same for a batch entry.
func TestRateLimitedCallIsRetriedWithItsCallID(t *testing.T) {
	t.Parallel()
	clock := newTestClock()
	h := start(t, withRateLimits(t, `default test_limits := {}

test_limits := {"rate_limit": [{"key": "writes", "rate": 2, "burst": 1}]} if input.tool.name == "write-file"
`), func(s *setup) { s.clock = clock })
	alice := h.token("acme", "alice", "developer")
	body := func(i int) string {
		return `{"call_id":"write-` + strconv.Itoa(i) + `","arguments":{"path":"notes/k` + strconv.Itoa(i) + `.txt","content":"x"}}`
	}
	refused := -1
	for i := 0; i < 50 && refused < 0; i++ {
		r := h.call(alice, "write-file", body(i))
		switch {
		case r.status == 429:
			refused = i
		case r.status != 200 || r.str("outcome") != "ok":
			t.Fatalf("write %d: %d %s", i, r.status, r.raw)
		}
	}
	if refused < 0 {
		t.Fatal("50 writes in a row passed a bucket of 1 refilled twice a second")
	}
	if h.exists("acme/notes/k" + strconv.Itoa(refused) + ".txt") {
		t.Fatal("the refused write ran")
	}
	clock.Advance(time.Second) // Retry-After
	r := h.call(alice, "write-file", body(refused))
	if r.status != 200 || r.str("outcome") != "ok" {
		t.Fatalf("retry of the refused call with its call_id after Retry-After: %d %s, want 200 ok (it never ran)", r.status, r.raw)
	}
	if !h.exists("acme/notes/k" + strconv.Itoa(refused) + ".txt") {
		t.Fatal("the retried write did not run")
	}
	// The retry's response is now the recorded one.
	if again := h.call(alice, "write-file", body(refused)); again.status != 200 || again.str("decision_id") != r.str("decision_id") {
		t.Fatalf("second retry: %d %s, want the recorded response of the first retry", again.status, again.raw)
	}
}

// A policy that means to limit and says it wrong is broken: the call fails
// closed (503), it never runs unlimited.
func TestMalformedRateLimitFailsClosed(t *testing.T) {
	t.Parallel()
	for name, obligation := range map[string]string{
		"negative rate":     `{"key": "k", "rate": -1, "burst": 5}`,
		"rate as a string":  `{"key": "k", "rate": "10", "burst": 5}`,
		"empty key":         `{"key": "", "rate": 1, "burst": 5}`,
		"zero burst":        `{"key": "k", "rate": 1, "burst": 0}`,
		"misspelled member": `{"key": "k", "rate": 1, "brust": 5}`,
		"not an object":     `"k"`,
	} {
		t.Run(name, func(t *testing.T) {
			h := start(t, withRateLimits(t, `test_limits := {"rate_limit": `+obligation+`}
`))
			alice := h.token("acme", "alice", "developer")
			r := h.call(alice, "write-file", writeBody("notes/broken.txt"))
			if r.status != 503 || r.errCode() != "unavailable" {
				t.Fatalf("call under a malformed rate_limit: %d %s, want 503", r.status, r.raw)
			}
			if h.exists("acme/notes/broken.txt") {
				t.Fatal("the call ran")
			}
		})
	}
}

// limits.tenant_rate protects the gateway: checked right after
// authentication, before the body is read (a malformed body over the
// limit is 429, not 400), per tenant.
func TestTenantRateRefusesBeforeReadingTheBody(t *testing.T) {
	t.Parallel()
	h := start(t, func(s *setup) { s.limitYAML = "  tenant_rate: 0.001\n  tenant_burst: 3\n" })
	alice := h.token("acme", "alice", "developer")
	for i := range 3 {
		if r := h.do("GET", "/v1/tools", alice, nil); r.status != 200 {
			t.Fatalf("request %d within the burst: %d %s", i+1, r.status, r.raw)
		}
	}
	for _, body := range []string{`{not json`, `{"arguments":{"path":"notes/x.txt","content":"x"},"tenant":"globex"}`, strings.Repeat("x", 70000)} {
		r := h.do("POST", "/v1/tools/write-file/calls", alice, []byte(body))
		if r.status != 429 || r.errCode() != "rate_limited" {
			t.Fatalf("body %.20q over the tenant's limit: %d %s, want 429", body, r.status, r.raw)
		}
		if n := retryAfter(t, r); n < 900 {
			t.Fatalf("Retry-After %d, want about 1000", n)
		}
	}
	// Another principal of the tenant shares its bucket; another tenant
	// does not; a missing credential is still 401, never 429.
	bob := h.token("acme", "bob", "auditor")
	if r := h.do("GET", "/v1/audit/events", bob, nil); r.status != 429 {
		t.Fatalf("bob of the limited tenant: %d %s", r.status, r.raw)
	}
	globex := h.token("globex", "alice", "developer")
	if r := h.call(globex, "read-file", `{"arguments":{"path":"docs/guide.md"}}`); r.status != 200 || r.str("outcome") != "ok" {
		t.Fatalf("globex: %d %s", r.status, r.raw)
	}
	if r := h.do("GET", "/v1/tools", "", nil); r.status != 401 {
		t.Fatalf("no credential: %d", r.status)
	}
	if got := h.metric(`toolgate_rate_limited_total{limit="tenant_rate"}`); got != 4 {
		t.Fatalf(`toolgate_rate_limited_total{limit="tenant_rate"} = %v, want 4`, got)
	}
	if h.exists("acme/notes/x.txt") {
		t.Fatal("a refused request ran")
	}
}

// approvals.max_pending bounds a tenant's pending held calls and
// questions: the call that would be held beyond it is refused (429,
// audited rate_limited), and leaves neither an approval nor an audited
// approval id that does not exist.
func TestMaxPendingBoundsHeldCallsAndQuestions(t *testing.T) {
	t.Parallel()
	h := start(t, func(s *setup) {
		s.toolsYAML = "tools:\n  builtin: [read-file, write-file, ask-user]\n"
		s.extraYAML = "approvals:\n  max_pending: 2\n"
	})
	alice := h.token("acme", "alice", "developer")
	approver := h.token("acme", "bob", "approver")
	held := func() response {
		return h.call(alice, "write-file", `{"arguments":{"path":"release/VERSION","content":"2"}}`)
	}
	var ids []string
	for range 2 {
		r := held()
		if r.status != 200 || r.str("outcome") != "approval_required" {
			t.Fatalf("held call: %d %s", r.status, r.raw)
		}
		ids = append(ids, r.body["data"].(map[string]any)["approval_id"].(string))
	}
	r := held()
	if r.status != 429 || r.errCode() != "rate_limited" {
		t.Fatalf("third held call: %d %s, want 429", r.status, r.raw)
	}
	if n := retryAfter(t, r); n != 30 {
		t.Fatalf("Retry-After %d, want 30", n)
	}
	refusedCall := r.body["error"].(map[string]any)["call_id"].(string)
	// An ask-user call would store a question: refused too, nothing asked.
	a := h.call(alice, "ask-user", `{"arguments":{"question":"Deploy?"}}`)
	if a.status != 429 || a.errCode() != "rate_limited" {
		t.Fatalf("ask-user beyond max_pending: %d %s", a.status, a.raw)
	}
	// Calls that hold nothing are not bounded by it.
	if r := h.call(alice, "write-file", writeBody("notes/free.txt")); r.status != 200 || r.str("outcome") != "ok" {
		t.Fatalf("a plain write: %d %s", r.status, r.raw)
	}
	// Exactly the two held calls exist; the refused one has no approval.
	l := h.do("GET", "/v1/approvals?status=pending", approver, nil)
	if got := len(l.body["approvals"].([]any)); l.status != 200 || got != 2 {
		t.Fatalf("pending approvals: %d %s, want 2", l.status, l.raw)
	}
	if p := h.do("GET", "/v1/calls/"+refusedCall, alice, nil); p.status != 404 {
		t.Fatalf("poll of the refused call: %d %s, want 404 (nothing is held)", p.status, p.raw)
	}
	evs := h.events("acme", "call_id="+refusedCall)
	if len(evs) != 1 || evs[0]["outcome"] != "rate_limited" || evs[0]["approval"] != nil ||
		!strings.Contains(evs[0]["reasons"].([]any)[0].(string), "approvals.max_pending reached") {
		t.Fatalf("audit of the refused hold: %v", evs)
	}
	// Every approval id the log announces exists.
	for _, ev := range h.events("acme", "limit=1000") {
		if ap, ok := ev["approval"].(map[string]any); ok {
			if g := h.do("GET", "/v1/approvals/"+ap["id"].(string), approver, nil); g.status != 200 {
				t.Fatalf("audited approval %s: %d", ap["id"], g.status)
			}
		}
	}
	if got := h.metric(`toolgate_rate_limited_total{limit="max_pending"}`); got != 2 {
		t.Fatalf(`toolgate_rate_limited_total{limit="max_pending"} = %v, want 2`, got)
	}
	// A decided approval frees its slot; other tenants never shared it.
	if d := h.do("POST", "/v1/approvals/"+ids[0]+"/deny", approver, []byte(`{}`)); d.status != 200 {
		t.Fatalf("deny: %d %s", d.status, d.raw)
	}
	if r := h.call(alice, "ask-user", `{"arguments":{"question":"Deploy?"}}`); r.status != 200 || r.str("outcome") != "awaiting_user" {
		t.Fatalf("ask-user after a slot freed: %d %s", r.status, r.raw)
	}
	if r := held(); r.status != 429 {
		t.Fatalf("held call once the question took the slot: %d %s", r.status, r.raw)
	}
	h.verify("acme")
}

// Holds racing for the last slots of approvals.max_pending: every call
// either is held with an approval that exists, or is refused with none;
// the log announces no approval id that is not stored.
func TestMaxPendingRaceLeavesNoOrphans(t *testing.T) {
	t.Parallel()
	h := start(t, func(s *setup) { s.extraYAML = "approvals:\n  max_pending: 3\n" })
	alice := h.token("acme", "alice", "developer")
	approver := h.token("acme", "bob", "approver")
	var mu sync.Mutex
	held, refused := map[string]string{}, []string{} // call id → approval id
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			r := h.call(alice, "write-file", `{"arguments":{"path":"release/VERSION","content":"`+strconv.Itoa(i)+`"}}`)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case r.status == 200 && r.str("outcome") == "approval_required":
				held[r.str("call_id")] = r.body["data"].(map[string]any)["approval_id"].(string)
			case r.status == 429:
				refused = append(refused, r.body["error"].(map[string]any)["call_id"].(string))
			default:
				t.Errorf("held call: %d %s", r.status, r.raw)
			}
		})
	}
	wg.Wait()
	// One replica checks the bound and commits the hold under one lock
	// per tenant: exactly the bound is held.
	if len(held) != 3 || len(refused) != 9 {
		t.Fatalf("%d held and %d refused of 12, want 3 and 9", len(held), len(refused))
	}
	l := h.do("GET", "/v1/approvals?status=pending", approver, nil)
	if got := len(l.body["approvals"].([]any)); got != len(held) {
		t.Fatalf("%d pending approvals for %d held calls", got, len(held))
	}
	for callID, id := range held {
		if g := h.do("GET", "/v1/approvals/"+id, approver, nil); g.status != 200 || g.str("call_id") != callID {
			t.Fatalf("approval %s of held call %s: %d %s", id, callID, g.status, g.raw)
		}
	}
	for _, callID := range refused {
		evs := h.events("acme", "call_id="+callID)
		if len(evs) != 1 || evs[0]["outcome"] != "rate_limited" || evs[0]["approval"] != nil {
			t.Fatalf("events of refused call %s: %v", callID, evs)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(h.dir, "ws", "acme", "release", "VERSION")); string(got) != "1\n" {
		t.Fatalf("release/VERSION = %q: a held or refused call ran", got)
	}
}

// ask-user calls racing for the last slots: exactly the bound's questions
// are stored; the others were allowed, found the bound full when storing
// their question, and answer 429 with a result event rate_limited.
func TestMaxPendingRaceOfQuestions(t *testing.T) {
	t.Parallel()
	h := start(t, func(s *setup) {
		s.toolsYAML = askTools
		s.extraYAML = "approvals:\n  max_pending: 2\n"
	})
	alice := h.token("acme", "alice", "developer")
	var mu sync.Mutex
	codes := map[string]int{}
	var refused []string
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			r := h.call(alice, "ask-user", `{"arguments":{"question":"Deploy?"}}`)
			mu.Lock()
			defer mu.Unlock()
			codes[strconv.Itoa(r.status)+"/"+r.str("outcome")+r.errCode()]++
			if r.status == 429 {
				refused = append(refused, r.body["error"].(map[string]any)["call_id"].(string))
			}
		})
	}
	wg.Wait()
	if codes["200/awaiting_user"] != 2 || codes["429/rate_limited"] != 8 {
		t.Fatalf("outcomes %v, want 2 awaiting_user and 8 rate_limited", codes)
	}
	for _, callID := range refused {
		for _, ev := range h.events("acme", "call_id="+callID) {
			if ev["question"] != nil || ev["outcome"] != "rate_limited" && !(ev["phase"] == "decision" && ev["outcome"] == "allow") {
				t.Fatalf("event of refused ask-user call %s: %v", callID, ev)
			}
		}
		if p := h.do("GET", "/v1/calls/"+callID, alice, nil); p.status != 404 {
			t.Fatalf("poll of refused ask-user call: %d %s", p.status, p.raw)
		}
	}
}

// limits.tenant_long_polls bounds a tenant's waiting long polls; a poll
// without wait, and other tenants, are not affected, and a finished poll
// gives its slot back.
func TestLongPollsAreBoundedPerTenant(t *testing.T) {
	t.Parallel()
	h := start(t, func(s *setup) { s.limitYAML = "  tenant_long_polls: 2\n" })
	alice := h.token("acme", "alice", "developer")
	r := h.call(alice, "write-file", `{"arguments":{"path":"release/VERSION","content":"2"}}`)
	if r.status != 200 || r.str("outcome") != "approval_required" {
		t.Fatalf("held call: %d %s", r.status, r.raw)
	}
	callID := r.str("call_id")
	approvalID := r.body["data"].(map[string]any)["approval_id"].(string)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	parked := make([]int, 2)
	for i := range 2 {
		wg.Go(func() { parked[i] = h.park(ctx, alice, callID) })
	}
	// Once both wait, a third waiting poll is refused at once. Until
	// then a third poll waits a second and answers pending: try again,
	// a little later than the refused polls above retry.
	var third response
	for i := 0; ; i++ {
		if i == 60 {
			t.Fatal("a third waiting poll was never refused")
		}
		time.Sleep(200 * time.Millisecond)
		third = h.do("GET", "/v1/calls/"+callID+"?wait=1s", alice, nil)
		if third.status == 429 {
			break
		}
		if third.status != 200 || third.str("outcome") != "pending" {
			t.Fatalf("third poll: %d %s", third.status, third.raw)
		}
	}
	if third.errCode() != "rate_limited" || retryAfter(t, third) != 1 {
		t.Fatalf("refused poll: %s, Retry-After %q", third.raw, third.header.Get("Retry-After"))
	}
	if p := h.do("GET", "/v1/calls/"+callID, alice, nil); p.status != 200 || p.str("outcome") != "pending" {
		t.Fatalf("a poll without wait: %d %s", p.status, p.raw)
	}
	globex := h.token("globex", "alice", "developer")
	if p := h.do("GET", "/v1/calls/no-such-call?wait=1s", globex, nil); p.status != 404 {
		t.Fatalf("globex's waiting poll: %d %s, want 404 (not 429)", p.status, p.raw)
	}
	if got := h.metric(`toolgate_rate_limited_total{limit="long_polls"}`); got < 1 {
		t.Fatalf(`toolgate_rate_limited_total{limit="long_polls"} = %v`, got)
	}
	// The decision wakes both parked polls; their slots come back.
	if d := h.do("POST", "/v1/approvals/"+approvalID+"/deny", h.token("acme", "bob", "approver"), []byte(`{}`)); d.status != 200 {
		t.Fatalf("deny: %d %s", d.status, d.raw)
	}
	wg.Wait()
	if parked[0] != 200 || parked[1] != 200 {
		t.Fatalf("parked polls answered %v", parked)
	}
	for range 3 {
		if p := h.do("GET", "/v1/calls/"+callID+"?wait=1s", alice, nil); p.status != 200 || p.str("outcome") != "denied" {
			t.Fatalf("poll after the slots came back: %d %s", p.status, p.raw)
		}
	}

	// Callers that hang up give their slots back too.
	r = h.call(alice, "write-file", `{"arguments":{"path":"release/VERSION","content":"3"}}`)
	if r.status != 200 || r.str("outcome") != "approval_required" {
		t.Fatalf("second held call: %d %s", r.status, r.raw)
	}
	second := r.str("call_id")
	hangup, hang := context.WithCancel(context.Background())
	var gone sync.WaitGroup
	for range 2 {
		gone.Go(func() { h.park(hangup, alice, second) })
	}
	for i := 0; ; i++ {
		if i == 60 {
			t.Fatal("the two hanging polls never filled the slots")
		}
		time.Sleep(200 * time.Millisecond)
		if p := h.do("GET", "/v1/calls/"+second+"?wait=1s", alice, nil); p.status == 429 {
			break
		}
	}
	hang()
	gone.Wait()
	for i := 0; ; i++ {
		if i == 50 {
			t.Fatal("slots of polls whose callers hung up never came back")
		}
		p := h.do("GET", "/v1/calls/"+second+"?wait=100ms", alice, nil)
		if p.status == 200 && p.str("outcome") == "pending" {
			break
		}
		if p.status != 429 {
			t.Fatalf("poll after the hang-ups: %d %s", p.status, p.raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// park long-polls callID for up to 60 s and returns the status of the
// poll that got a slot (0 when ctx ended first). The tests' probes may
// hold a slot for a second: a poll refused meanwhile tries again, sooner
// than the probes do.
func (h *harness) park(ctx context.Context, token, callID string) int {
	for range 100 {
		req, _ := http.NewRequestWithContext(ctx, "GET", h.base+"/v1/calls/"+callID+"?wait=60s", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0 // hung up
		}
		resp.Body.Close()
		if resp.StatusCode != 429 {
			return resp.StatusCode
		}
		time.Sleep(10 * time.Millisecond)
	}
	return 429
}

// The shipped pack limits a role's principals when its data says so
// (roles.<name>.rate_limit): each principal has a bucket of its own.
func TestShippedPackLimitsARolePerPrincipal(t *testing.T) {
	t.Parallel()
	h := start(t, func(s *setup) {
		s.policy = func(dir string) {
			f := filepath.Join(dir, "data.yaml")
			b, err := os.ReadFile(f)
			must(t, err)
			const line = "          max_output_bytes: 32768\n"
			if !strings.Contains(string(b), line) {
				t.Fatalf("data.yaml has no viewer line %q", line)
			}
			must(t, os.WriteFile(f, []byte(strings.Replace(string(b), line, line+"          rate_limit: {rate: 0.001, burst: 2}\n", 1)), 0o644))
		}
	})
	read := `{"arguments":{"path":"docs/guide.md"}}`
	bob := h.token("acme", "bob", "viewer")
	for range 2 {
		if r := h.call(bob, "read-file", read); r.status != 200 || r.str("outcome") != "ok" {
			t.Fatalf("bob's read: %d %s", r.status, r.raw)
		}
	}
	r := h.call(bob, "read-file", read)
	if r.status != 429 || r.errCode() != "rate_limited" {
		t.Fatalf("bob's third read: %d %s", r.status, r.raw)
	}
	evs := h.events("acme", "call_id="+r.body["error"].(map[string]any)["call_id"].(string))
	if len(evs) != 1 || !strings.Contains(evs[0]["reasons"].([]any)[0].(string), `"role/viewer/bob"`) {
		t.Fatalf("audit of bob's refused read: %v", evs)
	}
	if r := h.call(h.token("acme", "carol", "viewer"), "read-file", read); r.status != 200 {
		t.Fatalf("carol's read: %d %s", r.status, r.raw)
	}
	if r := h.call(h.token("acme", "dave", "developer"), "read-file", read); r.status != 200 {
		t.Fatalf("a developer's read: %d %s", r.status, r.raw)
	}
}

// Concurrent calls of one bucket never get more than its burst
// (SQLite: counted in this process).
func TestConcurrentCallsTakeExactlyTheBurst(t *testing.T) {
	t.Parallel()
	h := start(t, withRateLimits(t, `default test_limits := {}

test_limits := {"rate_limit": {"key": "writes", "rate": 0.001, "burst": 5}} if input.tool.name == "write-file"
`))
	alice := h.token("acme", "alice", "developer")
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			r := h.call(alice, "write-file", writeBody(fmt.Sprintf("notes/c%02d.txt", i)))
			mu.Lock()
			codes[r.status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	files, _ := filepath.Glob(filepath.Join(h.dir, "ws", "acme", "notes", "c*.txt"))
	if codes[200] != 5 || codes[429] != 15 || len(files) != 5 {
		t.Fatalf("statuses %v and %d files written, want 5 × 200, 15 × 429 and 5 files", codes, len(files))
	}
	if n := len(h.events("acme", "outcome=rate_limited&limit=100")); n != 15 {
		t.Fatalf("%d rate_limited events, want 15", n)
	}
}

// Replicas on one PostgreSQL database count in one bucket: a burst of 10
// with no refill to speak of admits exactly 10 calls in all, whichever
// replica each reaches.
func TestReplicasShareRateLimitBuckets(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	key := filepath.Join(t.TempDir(), "audit-signing.key")
	opts := []func(*setup){
		withRateLimits(t, `default test_limits := {}

test_limits := {"rate_limit": {"key": "shared-writes", "rate": 0.001, "burst": 10}} if input.tool.name == "write-file"
`),
		func(s *setup) {
			s.auditYAML = fmt.Sprintf("  driver: postgres\n  dsn: %q\n  signing_key_file: %q\n", dsn, key)
		},
	}
	replicas := []*harness{start(t, opts...), start(t, opts...)}
	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	for i := range 30 {
		wg.Go(func() {
			h := replicas[i%2]
			r := h.call(h.token("acme", "alice", "developer"), "write-file", writeBody(fmt.Sprintf("notes/w%02d.txt", i)))
			mu.Lock()
			codes[r.status]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if codes[200] != 10 || codes[429] != 20 {
		t.Fatalf("statuses across two replicas: %v, want 10 × 200 and 20 × 429", codes)
	}
	written := 0
	for _, h := range replicas {
		files, _ := filepath.Glob(filepath.Join(h.dir, "ws", "acme", "notes", "w*.txt"))
		written += len(files)
	}
	if written != 10 {
		t.Fatalf("%d files written, want 10", written)
	}
}

// When PostgreSQL cannot count a call's buckets, the call fails closed:
// 503, nothing runs, nothing is audited as allowed. Calls without a
// rate_limit never touch the buckets and go on.
func TestRateLimitStoreFailureFailsClosed(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	h := start(t, withRateLimits(t, perPrincipalWrites), func(s *setup) {
		s.auditYAML = fmt.Sprintf("  driver: postgres\n  dsn: %q\n", dsn)
	})
	alice := h.token("acme", "alice", "developer")
	if r := h.call(alice, "write-file", writeBody("notes/before.txt")); r.status != 200 || r.str("outcome") != "ok" {
		t.Fatalf("write before the failure: %d %s", r.status, r.raw)
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	must(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(context.Background(), `ALTER TABLE rate_buckets RENAME TO rate_buckets_gone`)
	must(t, err)
	r := h.call(alice, "write-file", writeBody("notes/during.txt"))
	if r.status != 503 || r.errCode() != "unavailable" {
		t.Fatalf("write while the buckets cannot be counted: %d %s, want 503", r.status, r.raw)
	}
	if h.exists("acme/notes/during.txt") {
		t.Fatal("the call ran without its rate limit being counted")
	}
	if r := h.call(alice, "read-file", `{"arguments":{"path":"docs/guide.md"}}`); r.status != 200 || r.str("outcome") != "ok" {
		t.Fatalf("a read (no rate_limit): %d %s", r.status, r.raw)
	}
	if got := h.metric(`toolgate_fail_closed_total{cause="limits"}`); got != 1 {
		t.Fatalf(`toolgate_fail_closed_total{cause="limits"} = %v, want 1`, got)
	}
	_, err = conn.Exec(context.Background(), `ALTER TABLE rate_buckets_gone RENAME TO rate_buckets`)
	must(t, err)
	if r := h.call(alice, "write-file", writeBody("notes/after.txt")); r.status != 200 || r.str("outcome") != "ok" {
		t.Fatalf("write once the buckets are back: %d %s", r.status, r.raw)
	}
}
