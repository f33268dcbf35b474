// go test -run '^$' -bench Postgres -benchmem ./internal/audit/
// (needs a server: see internal/pgtest)
package audit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/audit/storetest"
	"github.com/toolgate/toolgate/internal/pgtest"
	"github.com/toolgate/toolgate/internal/store"
)

// openPostgres opens the audit store of dsn for the benchmark.
func openPostgres(b *testing.B, dsn string, opts ...store.Option) audit.Store {
	b.Helper()
	db, err := store.Open(context.Background(), store.Postgres, dsn, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db.Audit()
}

// BenchmarkPostgresAppendParallel: many concurrent callers share
// transactions (group commit). With replicas=2, two Logs on two pools (two
// gateway processes) append into one table at once.
// events/batch is the mean batch size.
func BenchmarkPostgresAppendParallel(b *testing.B) {
	for _, replicas := range []int{1, 2} {
		b.Run(map[int]string{1: "replicas=1", 2: "replicas=2"}[replicas], func(b *testing.B) {
			dsn := pgtest.DSN(b)
			reg := prometheus.NewRegistry()
			var logs []*audit.Log
			for r := range replicas {
				s := openPostgres(b, dsn, store.WithMaxConns(4))
				opts := audit.LogOptions{}
				if r == 0 {
					opts.Registerer = reg
				}
				l, err := audit.NewLog(s, opts)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { l.Close() })
				logs = append(logs, l)
			}
			ctx := context.Background()
			var n atomic.Int64
			b.SetParallelism(32) // 32 × GOMAXPROCS callers
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := int(n.Add(1))
					if err := logs[i%replicas].Append(ctx, storetest.BenchEvent([]string{"acme", "globex"}[i/replicas%2], i)); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
			mfs, _ := reg.Gather()
			for _, mf := range mfs {
				if mf.GetName() == audit.MetricBatchSize {
					h := mf.GetMetric()[0].GetHistogram()
					b.ReportMetric(h.GetSampleSum()/float64(h.GetSampleCount()), "events/batch")
				}
			}
		})
	}
}

// BenchmarkPostgresQuery runs the API's page queries against 100k events
// of one tenant (the same cases as BenchmarkQuery on SQLite).
func BenchmarkPostgresQuery(b *testing.B) {
	dsn := pgtest.DSN(b)
	s := openPostgres(b, dsn, store.WithMaxConns(8))
	base := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	var tick atomic.Int64
	clock := func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Millisecond) }
	l, err := audit.NewLog(s, audit.LogOptions{Now: clock, MaxBatch: 1024})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	start := time.Now()
	storetest.Seed(b, l, seedEvents)
	ctx := context.Background()
	if err := l.Sync(ctx, "acme"); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded and integrated %d events in %v", seedEvents, time.Since(start).Round(time.Millisecond))
	// What autovacuum would do soon after.
	if conn, err := pgx.Connect(ctx, dsn); err != nil {
		b.Fatal(err)
	} else if _, err := conn.Exec(ctx, `ANALYZE audit_events`); err != nil {
		b.Fatal(err)
	} else {
		conn.Close(ctx)
	}

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
