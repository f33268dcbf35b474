package gateway

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
)

// Command slots are shared fairly: one tenant's commands take at most
// limits.tenant_commands slots, single and batch calls alike, so another
// tenant's command never queues behind them; a batch's independent
// commands run at once. Timing bounds are functional ("under 2 s instead
// of 13 s"), generous for a loaded 2-core machine; lower bounds, which a
// slow machine cannot break, carry the cap itself.

// bashBody is the body of a bash call.
func bashBody(cmd string) []byte {
	b, _ := json.Marshal(map[string]any{"arguments": map[string]any{"command": cmd}, "session_id": "s1"})
	return b
}

func TestOneTenantsCommandsDoNotStarveAnother(t *testing.T) {
	const limit, extra = 4, 4
	h := start(t, withAllTools, func(s *setup) { s.limitYAML = fmt.Sprintf("  tenant_commands: %d\n", limit) })
	acme := h.token("acme", "alice", "developer")
	globex := h.token("globex", "bob", "developer")

	// acme saturates its command slots: limit sleeps run, extra wait.
	t0 := time.Now()
	var wg sync.WaitGroup
	took := make([]time.Duration, limit+extra)
	outs := make([]response, limit+extra)
	for i := range limit + extra {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i] = h.do("POST", "/v1/tools/bash/calls", acme, bashBody("sleep 3"))
			took[i] = time.Since(t0)
		}()
	}
	waitFor(t, "acme's commands to fill its slots and queue", func() bool {
		return h.g.invoker.CommandsWaiting() > 0
	})

	// globex's command is answered at once, not after acme's: before any
	// of acme's sleeps, which all hold or wait for acme's slots, ends.
	r := h.do("POST", "/v1/tools/bash/calls", globex, bashBody("echo hi"))
	echoDone := time.Since(t0)
	if r.str("outcome") != "ok" || r.str("content") != "hi\n[exit code: 0]" {
		t.Fatalf("globex echo while acme is saturated: %s", r.raw)
	}

	wg.Wait()
	total := time.Since(t0)
	if first := slices.Min(took); echoDone >= first {
		t.Fatalf("globex's echo ended after %s, after acme's first sleep (%s): it waited for acme's slots", echoDone, first)
	}
	for i, o := range outs {
		if o.status != 200 || o.str("outcome") != "ok" {
			t.Errorf("acme sleep %d: %d %s", i, o.status, o.raw)
		}
	}
	// Never more than limit of acme's sleeps at once: 8 sleeps of 3 s in
	// 4 slots take two rounds, so at least 4 of them end after 6 s. Without
	// the cap all would end after about 3 s.
	if total < 5500*time.Millisecond {
		t.Fatalf("%d sleeps of 3 s took %s: more than %d ran at once", limit+extra, total, limit)
	}
	slowest := 0
	for _, d := range took {
		if d >= 5500*time.Millisecond {
			slowest++
		}
	}
	if slowest < extra {
		t.Fatalf("only %d calls finished in the second round, want %d: %v", slowest, extra, took)
	}
}

func TestABatchsIndependentCommandsRunAtOnce(t *testing.T) {
	const n = 8 // the default limits.tenant_commands and tenant_concurrency
	h := start(t, withAllTools)
	dev := h.token("acme", "alice", "developer")
	var calls []string
	for i := range n {
		calls = append(calls, fmt.Sprintf(`{"tool":"bash","arguments":{"command":"sleep 2"},"call_id":"s-%d"}`, i))
	}
	t0 := time.Now()
	r := h.do("POST", "/v1/batches", dev, []byte(`{"session_id":"s1","calls":[`+strings.Join(calls, ",")+`]}`))
	took := time.Since(t0)
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.raw)
	}
	for i, res := range r.results(t) {
		if res["outcome"] != "ok" || res["content"] != "[exit code: 0]" {
			t.Errorf("result %d: %v", i, res)
		}
	}
	// One after another they take 2n seconds; at once, 2 s plus the start
	// of n jails (slow under the race detector, whose helper binary is
	// the instrumented test binary).
	if took > n*time.Second {
		t.Fatalf("a batch of %d independent sleep 2 took %s", n, took)
	}
}

func TestABatchCountsAgainstTheTenantsCommandSlots(t *testing.T) {
	// A batch's commands and the tenant's single calls share one cap: with
	// 2 slots, a batch of 2 sleeps holds both, and a single command of the
	// same tenant waits for one while another tenant's does not.
	h := start(t, withAllTools, func(s *setup) { s.limitYAML = "  tenant_commands: 2\n" })
	acme := h.token("acme", "alice", "developer")
	globex := h.token("globex", "bob", "developer")
	done := make(chan response, 1)
	go func() {
		done <- h.do("POST", "/v1/batches", acme, []byte(`{"session_id":"s1","calls":[
			{"tool":"bash","arguments":{"command":"sleep 3"}},
			{"tool":"bash","arguments":{"command":"sleep 3"}},
			{"tool":"bash","arguments":{"command":"sleep 3"}}]}`))
	}()
	waitFor(t, "the batch to fill acme's slots", func() bool { return h.g.invoker.CommandsWaiting() > 0 })
	s := time.Now()
	if r := h.do("POST", "/v1/tools/bash/calls", globex, bashBody("echo hi")); r.str("outcome") != "ok" || time.Since(s) > 2*time.Second {
		t.Fatalf("globex echo beside acme's batch: %s after %s", r.raw, time.Since(s))
	}
	s = time.Now()
	if r := h.do("POST", "/v1/tools/bash/calls", acme, bashBody("echo hi")); r.str("outcome") != "ok" {
		t.Fatalf("acme echo: %s", r.raw)
	}
	if d := time.Since(s); d < time.Second {
		t.Fatalf("acme's single command ran beside a batch holding all its slots (after %s)", d)
	}
	r := <-done
	if r.status != 200 {
		t.Fatalf("batch: %d %s", r.status, r.raw)
	}
	for i, res := range r.results(t) {
		if res["outcome"] != "ok" {
			t.Errorf("batch result %d: %v", i, res)
		}
	}
}

// waitFor polls cond; the bound guards against hanging, it is not a
// timing assertion.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
