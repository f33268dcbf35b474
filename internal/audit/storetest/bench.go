package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/toolgate/toolgate/internal/audit"
)

// BenchEvent is a realistic decision event (about 700 bytes of JSON), the
// i-th of a benchmark's stream for tenant.
func BenchEvent(tenant string, i int) *audit.Event {
	return &audit.Event{
		Tenant:    tenant,
		Principal: fmt.Sprintf("user-%d", i%50),
		Client:    "platform-a",
		// Real call and decision ids are UUID v7s: they grow with time.
		CallID:         fmt.Sprintf("call-%09d", i),
		DecisionID:     fmt.Sprintf("dec-%09d", i),
		SessionID:      fmt.Sprintf("s-%d", i%200),
		Tool:           []string{"read-file", "write-file", "edit-file", "glob", "grep", "bash"}[i%6],
		Action:         "fs.read",
		Phase:          []string{audit.PhaseDecision, audit.PhaseResult}[i%2],
		Outcome:        []string{"allow", "ok", "denied", "tool_error"}[i%4],
		Reasons:        []string{"role developer may read docs/"},
		PolicyRevision: "rev-42",
		RequestDigest:  "sha256:3f1c8e8a0c6f4b1d9e2a7c5b8d0e1f2a3b4c5d6e7f8091a2b3c4d5e6f708192a",
		Input: map[string]any{
			"version":   1,
			"tenant":    tenant,
			"principal": map[string]any{"id": fmt.Sprintf("user-%d", i%50), "roles": []any{"developer"}, "groups": []any{}},
			"tool":      map[string]any{"name": "read-file", "kind": "builtin", "effects": []any{"fs.read"}},
			"action":    "fs.read",
			"resources": []any{map[string]any{"type": "file", "path": "docs/guide.md", "access": "read"}},
			"args":      map[string]any{"path": "docs/guide.md", "offset": 1, "limit": 200},
		},
		DurationsUS: map[string]int64{"prepare": 41, "decide": 37},
	}
}

// Seed appends n BenchEvents of acme through l from 64 concurrent callers.
func Seed(tb testing.TB, l *audit.Log, n int) {
	tb.Helper()
	const workers = 64
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || failed.Load() != nil {
					return
				}
				if err := l.Append(context.Background(), BenchEvent("acme", i)); err != nil {
					failed.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		tb.Fatalf("seed: %v", err)
	}
}
