package gateway

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// cacheCount reads toolgate_policy_decision_cache_total for an entrypoint
// and result ("hit" or "miss").
func (h *harness) cacheCount(entrypoint, result string) int {
	h.t.Helper()
	m := string(h.do("GET", "/metrics", "", nil).raw)
	re := regexp.MustCompile(`toolgate_policy_decision_cache_total\{entrypoint="` + entrypoint + `",result="` + result + `"\} (\d+)`)
	sm := re.FindStringSubmatch(m)
	if sm == nil {
		h.t.Fatalf("metrics lack the decision cache counter for %s/%s", entrypoint, result)
	}
	n, err := strconv.Atoi(sm[1])
	must(h.t, err)
	return n
}

// Repeated calls are answered from the decision cache with exactly the
// decision a fresh evaluation gives — allow and deny alike — every call is
// still audited with its own call id and digest, and a policy change is
// never answered from the previous revision's cache.
func TestDecisionCacheEndToEnd(t *testing.T) {
	t.Parallel()
	h := start(t)
	dev := h.token("acme", "alice", "developer")
	admin := h.token("acme", "pat", "policy-admin")

	hits0 := h.cacheCount("authz", "hit")
	type seen struct{ outcome, content, callID string }
	var runs []seen
	for range 2 {
		for _, path := range []string{"docs/guide.md", "secrets/db.env"} {
			r := h.call(dev, "read-file", `{"arguments":{"path":"`+path+`"}}`)
			if r.status != 200 {
				t.Fatalf("%s: %d %s", path, r.status, r.raw)
			}
			runs = append(runs, seen{outcome: r.str("outcome"), content: r.str("content"), callID: r.str("call_id")})
		}
	}
	if runs[0].outcome != "ok" || runs[1].outcome != "denied" {
		t.Fatalf("first round: %+v", runs[:2])
	}
	for i := range 2 {
		a, b := runs[i], runs[i+2]
		if a.outcome != b.outcome || a.content != b.content {
			t.Fatalf("cached answer differs: %+v vs %+v", a, b)
		}
		if a.callID == b.callID {
			t.Fatalf("two calls share a call id: %+v %+v", a, b)
		}
	}
	if got := h.cacheCount("authz", "hit") - hits0; got < 2 {
		t.Fatalf("authorization cache hits = %d, want at least 2", got)
	}
	// Each call has its own decision event with the same reasons.
	var reasons, digests []string
	for _, r := range runs {
		evs := h.events("acme", "call_id="+r.callID+"&phase=decision")
		if len(evs) != 1 {
			t.Fatalf("call %s has %d decision events", r.callID, len(evs))
		}
		reasons = append(reasons, toJSON(t, evs[0]["reasons"]))
		digests = append(digests, toJSON(t, evs[0]["request_digest"]))
	}
	if reasons[0] != reasons[2] || reasons[1] != reasons[3] {
		t.Fatalf("reasons differ between a miss and a hit: %v", reasons)
	}
	if digests[0] == digests[2] || digests[1] == digests[3] || digests[0] == "null" {
		t.Fatalf("two calls share a request digest: %v", digests)
	}

	// Take read-file away from developers: the very same call is now
	// denied, on the new revision.
	rev0 := h.do("GET", "/v1/policy", admin, nil).str("revision")
	extra := filepath.Join(h.dir, "policies", "zz_freeze.rego")
	must(t, os.WriteFile(extra, []byte("package toolgate.authz\n\ndeny contains \"reads are frozen\" if input.tool.name == \"read-file\"\n"), 0o644))
	deadline := time.Now().Add(20 * time.Second)
	for h.do("GET", "/v1/policy", admin, nil).str("revision") == rev0 {
		if time.Now().After(deadline) {
			t.Fatal("the policy change was not loaded")
		}
		time.Sleep(20 * time.Millisecond)
	}
	r := h.call(dev, "read-file", `{"arguments":{"path":"docs/guide.md"}}`)
	if r.str("outcome") != "denied" || r.str("content") != "reads are frozen" {
		t.Fatalf("after the policy change: %d %s", r.status, r.raw)
	}
	h.verify("acme")
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	must(t, err)
	return string(b)
}

// Through the real server, a repeated call is offered (availability) and
// masked (audit mask) from the cache, its audited document is masked like
// the first one's, and the cached offer is not given to a caller with
// other roles.
func TestAvailabilityAndMaskCacheEndToEnd(t *testing.T) {
	t.Parallel()
	h := start(t)
	dev := h.token("acme", "alice", "developer")
	const body = `{"arguments":{"path":"notes/cached.txt","content":"top secret"},"session_id":"s-cache"}`
	count := func() (availHits, availMisses, maskHits, maskMisses int) {
		return h.cacheCount("availability", "hit"), h.cacheCount("availability", "miss"),
			h.cacheCount("mask", "hit"), h.cacheCount("mask", "miss")
	}
	decide := func(tok string) response {
		t.Helper()
		r := h.do("POST", "/v1/tools/write-file/decisions", tok, []byte(body))
		if r.status != 200 {
			t.Fatalf("%d %s", r.status, r.raw)
		}
		return r
	}

	ah0, am0, mh0, mm0 := count()
	first := decide(dev)
	ah1, am1, mh1, mm1 := count()
	if first.str("outcome") != "allow" || ah1 != ah0 || am1 != am0+1 || mh1 != mh0 || mm1 != mm0+1 {
		t.Fatalf("first call: outcome %s, availability +%d hits +%d misses, mask +%d hits +%d misses; want allow and one miss each",
			first.str("outcome"), ah1-ah0, am1-am0, mh1-mh0, mm1-mm0)
	}
	second := decide(dev)
	ah2, am2, mh2, mm2 := count()
	if second.str("outcome") != "allow" || ah2 != ah1+1 || am2 != am1 || mh2 != mh1+1 || mm2 != mm1 {
		t.Fatalf("second call: outcome %s, availability +%d hits +%d misses, mask +%d hits +%d misses; want allow and one hit each",
			second.str("outcome"), ah2-ah1, am2-am1, mh2-mh1, mm2-mm1)
	}
	for _, r := range []response{first, second} {
		evs := h.events("acme", "call_id="+r.str("call_id")+"&phase=decision")
		if len(evs) != 1 {
			t.Fatalf("call %s has %d decision events", r.str("call_id"), len(evs))
		}
		if got := evs[0]["input"].(map[string]any)["args"].(map[string]any)["content"]; got != "**masked**" {
			t.Fatalf("call %s: audited content %v, want it masked", r.str("call_id"), got)
		}
	}

	// Same principal, a role that is not offered write-file: evaluated
	// anew, and refused.
	viewer := h.token("acme", "alice", "viewer")
	r := decide(viewer)
	ah3, am3, _, _ := count()
	if r.str("outcome") != "unavailable" || ah3 != ah2 || am3 != am2+1 {
		t.Fatalf("viewer: outcome %s, availability +%d hits +%d misses; want unavailable from a fresh evaluation",
			r.str("outcome"), ah3-ah2, am3-am2)
	}
	h.verify("acme")
}
