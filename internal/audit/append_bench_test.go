// The append microbenchmark of issue 13 (BENCHMARKS.md "Audit write
// path (issue 13)"):
//
//	go test -run '^$' -bench 'AppendDurable' -benchtime 200000x ./internal/audit/
//
// (the PostgreSQL cases need TOOLGATE_TEST_POSTGRES_DSN; see internal/pgtest).
package audit_test

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/audit/storetest"
	"github.com/toolgate/toolgate/internal/pgtest"
	"github.com/toolgate/toolgate/internal/store"
)

// cpuTime is the CPU time (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAppendDurable: 64 writers append durable events (each Append
// returns once its batch is committed with fsync) as fast as they can.
// Events are built before the clock starts, so that the numbers are the
// log's own cost: encoding, hashing, the queue, the commit. It reports
// events/s (wall), cpu-µs/event (the whole process's user+system CPU per
// event, integrator included when it runs) and events/batch. Cases:
//
//   - append-only: the integrator does not run during the measurement
//     (it catches up afterwards): the hot path alone;
//   - integrating: the integrator runs beside the writers, as in a
//     gateway; backlog-ms is how long the integrator took after the last
//     append to have everything in the tree.
//
// The paced cases (at=N/s) offer N events/s from 16 writers instead of as
// many as possible, like a gateway under load short of saturation, with
// the integrator running; p99-ms is then open-loop (from each event's
// scheduled time), so it includes any wait for the write lock.
func BenchmarkAppendDurable(b *testing.B) {
	for _, tc := range []struct {
		name        string
		driver      string
		integrating bool
		rate        int // events/s offered; 0: as fast as possible
	}{
		{"sqlite/append-only", store.SQLite, false, 0},
		{"sqlite/integrating", store.SQLite, true, 0},
		{"sqlite/integrating/at=2000/s", store.SQLite, true, 2000},
		{"sqlite/integrating/at=5000/s", store.SQLite, true, 5000},
		{"postgres/append-only", store.Postgres, false, 0},
		{"postgres/integrating", store.Postgres, true, 0},
		{"postgres/integrating/at=2000/s", store.Postgres, true, 2000},
		{"postgres/integrating/at=5000/s", store.Postgres, true, 5000},
	} {
		writers := 64
		if tc.rate > 0 {
			writers = 16
		}
		b.Run(tc.name, func(b *testing.B) {
			var s audit.Store
			switch tc.driver {
			case store.SQLite:
				db, err := store.Open(context.Background(), store.SQLite, filepath.Join(b.TempDir(), "audit.db"))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { db.Close() })
				s = db.Audit()
			case store.Postgres:
				s = openPostgres(b, pgtest.DSN(b), store.WithMaxConns(8))
			}
			opts := audit.LogOptions{Registerer: prometheus.NewRegistry()}
			if !tc.integrating {
				opts.IntegrateInterval, opts.IntegrateBatch = time.Hour, 1<<30
			}
			reg := prometheus.NewRegistry()
			opts.Registerer = reg
			l, err := audit.NewLog(s, opts)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { l.Close() })
			tenants := []string{"acme", "globex"}
			templates := make([]audit.Event, writers)
			for w := range templates {
				templates[w] = *storetest.BenchEvent(tenants[w%2], w)
			}
			ctx := context.Background()
			var next atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			cpu0, start := cpuTime(), time.Now()
			lat := make([][]time.Duration, writers)
			for w := range writers {
				wg.Go(func() {
					ev := templates[w]
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						t0 := time.Now()
						if tc.rate > 0 { // open loop: from the event's scheduled time
							t0 = start.Add(time.Duration(i) * time.Second / time.Duration(tc.rate))
							time.Sleep(time.Until(t0))
						}
						e := ev
						if err := l.Append(ctx, &e); err != nil {
							b.Error(err)
							return
						}
						lat[w] = append(lat[w], time.Since(t0))
					}
				})
			}
			wg.Wait()
			elapsed, cpu := time.Since(start), cpuTime()-cpu0
			backlog, cpu1 := time.Now(), cpuTime()
			for _, t := range tenants {
				if err := l.Sync(ctx, t); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
			all := slices.Concat(lat...)
			slices.Sort(all)
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1e3, "p99-ms")
			b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/event")
			if tc.integrating {
				b.ReportMetric(float64(time.Since(backlog).Milliseconds()), "backlog-ms")
			} else {
				// What integrating the whole backlog afterwards cost, in
				// large batches with no appends beside it.
				b.ReportMetric(float64((cpuTime()-cpu1).Nanoseconds())/1e3/float64(b.N), "integrate-cpu-µs/event")
				b.ReportMetric(float64(b.N)/time.Since(backlog).Seconds(), "integrated/s")
			}
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
