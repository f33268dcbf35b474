package gateway

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/sandbox/sandboxtest"
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

// fifos makes n FIFOs in acme's notes/ and returns their workspace paths
// and host paths. A `cat` of one blocks until the test releases it.
func fifos(t *testing.T, h *harness, n int) (rel, host []string) {
	t.Helper()
	for i := range n {
		r := fmt.Sprintf("notes/fifo-%d", i)
		p := filepath.Join(h.dir, "ws/acme", r)
		sandboxtest.MakeFIFO(t, p)
		rel, host = append(rel, r), append(host, p)
	}
	return rel, host
}

// held is a `cat` of a FIFO the test holds: the test opened the FIFO for
// writing once the cat had it open for reading, so the cat stays blocked
// until release closes it (its end of file).
type held struct{ fd int }

// hold returns the FIFO at p held, or false while no command reads it.
// Unlike an open that closes at once, it never ends the reader.
func hold(t *testing.T, p string) (held, bool) {
	t.Helper()
	fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if errors.Is(err, syscall.ENXIO) {
		return held{}, false
	}
	must(t, err)
	return held{fd}, true
}

func (h held) release() { syscall.Close(h.fd) }

// A batch's independent commands run at once: all n of them are blocked
// reading a FIFO of their own at the same time before any is released
// (one after another, the second would never start).
func TestABatchsIndependentCommandsRunAtOnce(t *testing.T) {
	t.Parallel()
	const n = 8 // the default limits.tenant_commands and tenant_concurrency
	h := start(t, withAllTools)
	dev := h.token("acme", "alice", "developer")
	rel, host := fifos(t, h, n)
	var calls []string
	for i := range n {
		calls = append(calls, fmt.Sprintf(`{"tool":"bash","arguments":{"command":"cat %s"},"call_id":"s-%d"}`, rel[i], i))
	}
	done := make(chan response, 1)
	go func() {
		done <- h.do("POST", "/v1/batches", dev, []byte(`{"session_id":"s1","calls":[`+strings.Join(calls, ",")+`]}`))
	}()
	holds := map[string]held{}
	waitFor(t, "all the batch's commands to be running at once", func() bool {
		for _, p := range host {
			if _, ok := holds[p]; !ok {
				if x, ok := hold(t, p); ok {
					holds[p] = x
				}
			}
		}
		return len(holds) == n
	})
	for _, x := range holds {
		x.release()
	}
	r := <-done
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.raw)
	}
	for i, res := range r.results(t) {
		if res["outcome"] != "ok" || res["content"] != "[exit code: 0]" {
			t.Errorf("result %d: %v", i, res)
		}
	}
}

func TestABatchCountsAgainstTheTenantsCommandSlots(t *testing.T) {
	t.Parallel() // its own gateway, workspace and database; mostly waiting
	// A batch's commands and the tenant's single calls share one cap: with
	// 2 slots, a batch of 3 blocked commands holds both, and a single
	// command of the same tenant waits for one while another tenant's does
	// not.
	h := start(t, withAllTools, func(s *setup) { s.limitYAML = "  tenant_commands: 2\n" })
	acme := h.token("acme", "alice", "developer")
	globex := h.token("globex", "bob", "developer")
	rel, host := fifos(t, h, 3)
	done := make(chan response, 1)
	go func() {
		done <- h.do("POST", "/v1/batches", acme, []byte(fmt.Sprintf(`{"session_id":"s1","calls":[
			{"tool":"bash","arguments":{"command":"cat %s"}},
			{"tool":"bash","arguments":{"command":"cat %s"}},
			{"tool":"bash","arguments":{"command":"cat %s"}}]}`, rel[0], rel[1], rel[2])))
	}()
	// Two of the batch's commands run (whichever two got the slots), the
	// third waits.
	holds := map[string]held{}
	waitFor(t, "the batch to fill acme's slots", func() bool {
		for _, p := range host {
			if _, ok := holds[p]; !ok {
				if x, ok := hold(t, p); ok {
					holds[p] = x
				}
			}
		}
		return len(holds) == 2 && h.g.invoker.CommandsWaiting() > 0
	})
	// globex is answered while acme's batch holds both slots (the test
	// holds those commands).
	if r := h.do("POST", "/v1/tools/bash/calls", globex, bashBody("echo hi")); r.str("outcome") != "ok" {
		t.Fatalf("globex echo beside acme's batch: %s", r.raw)
	}
	// acme's single command waits for a slot: it cannot end before one of
	// the batch's commands is released.
	var released atomic.Bool
	echo := make(chan response, 1)
	go func() { echo <- h.do("POST", "/v1/tools/bash/calls", acme, bashBody("echo hi")) }()
	waitFor(t, "acme's single command to wait", func() bool { return h.g.invoker.CommandsWaiting() > 1 })
	released.Store(true)
	for p, x := range holds {
		x.release()
		delete(holds, p)
	}
	waitFor(t, "the batch's third command to run", func() bool {
		for _, p := range host {
			if x, ok := hold(t, p); ok {
				x.release()
				return true
			}
		}
		return false
	})
	if r := <-echo; r.str("outcome") != "ok" || !released.Load() {
		t.Fatalf("acme echo: %s", r.raw)
	}
	r := <-done
	if r.status != 200 {
		t.Fatalf("batch: %d %s", r.status, r.raw)
	}
}

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
