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

// cacheHits reads toolgate_policy_decision_cache_total for an entrypoint.
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
