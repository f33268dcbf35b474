// go test -run '^$' -bench . -benchmem ./internal/audit/
package audit_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/audit/storetest"
	"github.com/toolgate/toolgate/internal/store"
)

func benchLog(b *testing.B, opts audit.LogOptions) *audit.Log {
	b.Helper()
	s, err := store.Open(context.Background(), store.SQLite, filepath.Join(b.TempDir(), "audit.db"))
	if err != nil {
		b.Fatal(err)
	}
	l, err := audit.NewLog(s.Audit(), opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		l.Close()
		s.Close()
	})
	return l
}

// BenchmarkLogAppend: one caller at a time, so every append is its own
// transaction and fsync.
func BenchmarkLogAppend(b *testing.B) {
	l := benchLog(b, audit.LogOptions{})
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		if err := l.Append(ctx, storetest.BenchEvent("acme", i)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLogAppendParallel: many concurrent callers share transactions
// (group commit); events/batch is the mean batch size.
func BenchmarkLogAppendParallel(b *testing.B) {
	reg := prometheus.NewRegistry()
	l := benchLog(b, audit.LogOptions{Registerer: reg})
	ctx := context.Background()
	var n atomic.Int64
	b.SetParallelism(32) // 32 × GOMAXPROCS callers
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := int(n.Add(1))
			if err := l.Append(ctx, storetest.BenchEvent([]string{"acme", "globex"}[i%2], i)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == audit.MetricBatchSize {
			h := mf.GetMetric()[0].GetHistogram()
			b.ReportMetric(h.GetSampleSum()/float64(h.GetSampleCount()), "events/batch")
		}
	}
}

const seedEvents = 100_000

// seed appends n events through a Log with many concurrent callers.
func seed(b *testing.B, l *audit.Log, n int) {
	const workers = 64
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := l.Append(context.Background(), storetest.BenchEvent("acme", i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkQuery runs page queries against 100k events of one tenant.
func BenchmarkQuery(b *testing.B) {
	base := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	var tick atomic.Int64
	clock := func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Millisecond) }
	l := benchLog(b, audit.LogOptions{Now: clock, MaxBatch: 1024})
	start := time.Now()
	seed(b, l, seedEvents)
	ctx := context.Background()
	if err := l.Sync(ctx, "acme"); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded and integrated %d events in %v", seedEvents, time.Since(start).Round(time.Millisecond))

	first, err := l.Query(ctx, "acme", audit.Filter{Limit: 100})
	if err != nil {
		b.Fatal(err)
	}
	mid := base.Add(seedEvents / 2 * time.Millisecond)
	for _, bc := range []struct {
		name string
		f    audit.Filter
	}{
		{"newest-100", audit.Filter{Limit: 100}},
		{"next-page-100", audit.Filter{Limit: 100, Cursor: first.NextCursor}},
		{"newest-1000", audit.Filter{Limit: 1000}},
		{"tool-100", audit.Filter{Tool: "grep", Limit: 100}},
		{"session-all", audit.Filter{SessionID: "s-7", Limit: 1000}}, // 500 events
		{"call-id", audit.Filter{CallID: "call-000004242"}},
		{"time-window-100", audit.Filter{From: mid, To: mid.Add(time.Minute), Limit: 100}},
		{"principal+outcome-100", audit.Filter{Principal: "user-7", Outcome: "ok", Limit: 100}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				p, err := l.Query(ctx, "acme", bc.f)
				if err != nil || len(p.Events) == 0 {
					b.Fatalf("Query: %d events, %v", len(p.Events), err)
				}
			}
		})
	}
	b.Run("get", func(b *testing.B) {
		id := first.Events[50].ID
		for b.Loop() {
			if _, err := l.Get(ctx, "acme", id); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("verify-100k", func(b *testing.B) {
		for b.Loop() {
			res, err := l.Verify(ctx, "acme")
			if err != nil || !res.OK || res.EventsChecked != seedEvents {
				b.Fatalf("Verify = %+v, %v", res, err)
			}
		}
	})
}
