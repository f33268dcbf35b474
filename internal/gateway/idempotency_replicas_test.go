package gateway

import (
	"reflect"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/pgtest"
)

// call sends one call and returns its status and whole body.
func (c *cluster) call(base, token, tool string, body any) (int, map[string]any) {
	c.t.Helper()
	code, out, err := postCall(base, token, tool, body)
	if err != nil {
		c.t.Error(err)
	}
	return code, out
}

// A call_id is one key for every replica of one PostgreSQL database: a
// retry at another replica answers the recorded response, concurrent
// retries at both run the call once, and another request with the key is
// a conflict everywhere.
func TestRetryAtAnotherReplicaAnswersTheRecordedResponse(t *testing.T) {
	t.Parallel()
	c := newCluster(t, pgtest.DSN(t))
	a, b := c.start("a", c.dsn), c.start("b", c.dsn)
	tok := c.token("developer", "auditor")

	code, first := c.call(a.base, tok, "write-file", writeCall("idem-1"))
	if code != 200 || first["outcome"] != "ok" {
		t.Fatalf("first call at a: %d %v", code, first)
	}
	for _, r := range []*replica{b, a} {
		if code, again := c.call(r.base, tok, "write-file", writeCall("idem-1")); code != 200 || !reflect.DeepEqual(again, first) {
			t.Fatalf("retry at %s: %d %v, want the recorded %v", r.base, code, again, first)
		}
	}

	// Concurrent requests with one new call_id, spread over both replicas:
	// one decides and runs, the others wait for its response.
	const n = 12
	var wg sync.WaitGroup
	codes := make([]int, n)
	bodies := make([]map[string]any, n)
	for i := range n {
		r := []*replica{a, b}[i%2]
		wg.Go(func() { codes[i], bodies[i] = c.call(r.base, tok, "write-file", writeCall("idem-2")) })
	}
	wg.Wait()
	for i := range n {
		if codes[i] != 200 || bodies[i]["outcome"] != "ok" || !reflect.DeepEqual(bodies[i], bodies[0]) {
			t.Fatalf("request %d: %d %v, want %v", i, codes[i], bodies[i], bodies[0])
		}
	}

	// Other arguments with a used call_id: a conflict at either replica.
	other := writeCall("idem-1")
	other["arguments"].(map[string]any)["content"] = "changed"
	for _, r := range []*replica{a, b} {
		code, body := c.call(r.base, tok, "write-file", other)
		if e, _ := body["error"].(map[string]any); code != 409 || e["code"] != "conflict" {
			t.Fatalf("conflict at %s: %d %v", r.base, code, body)
		}
	}

	events := allEvents(t, a.base, tok)
	c.reconcile(t, events)
	count := map[string]int{}
	for _, e := range events {
		count[e["call_id"].(string)+" "+e["phase"].(string)]++
	}
	for _, k := range []string{"idem-1 decision", "idem-1 result", "idem-2 decision", "idem-2 result"} {
		if count[k] != 1 {
			t.Fatalf("%d %s events, want 1 (all: %v)", count[k], k, count)
		}
	}
}
