package store

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/pgtest"
	"github.com/toolgate/toolgate/internal/ratelimit"
)

func openLimiter(t *testing.T, b backend, dsn string) Limiter {
	t.Helper()
	db, err := Open(context.Background(), b.driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db.Limiter()
}

func mustTake(t *testing.T, l ratelimit.Limiter, tenant string, ls ...ratelimit.Limit) ratelimit.Verdict {
	t.Helper()
	v, err := l.Take(context.Background(), tenant, ratelimit.Normalize(ls))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Both drivers count the same way: the burst exactly, then a refusal that
// says how long to wait; buckets per tenant and key; all or none.
func TestLimiterConformance(t *testing.T) {
	slow := func(key string, burst float64) ratelimit.Limit {
		return ratelimit.Limit{Key: key, Rate: 0.001, Burst: burst} // a token every 1000s
	}
	eachBackend(t, func(t *testing.T, b backend) {
		t.Run("burst then refusal", func(t *testing.T) {
			l := openLimiter(t, b, b.dsn(t))
			for i := range 3 {
				if v := mustTake(t, l, "acme", slow("k", 3)); !v.OK {
					t.Fatalf("take %d refused: %+v", i+1, v)
				}
			}
			v := mustTake(t, l, "acme", slow("k", 3))
			if v.OK || v.Key != "k" {
				t.Fatalf("take 4: %+v, want refused by k", v)
			}
			// The next token is due 1000s after the first take: a minute
			// of slack for a slow machine, never more than the interval.
			if v.RetryAfter <= 940*time.Second || v.RetryAfter > 1000*time.Second {
				t.Fatalf("RetryAfter = %v, want just under 1000s", v.RetryAfter)
			}
		})
		t.Run("tenants and keys are separate", func(t *testing.T) {
			l := openLimiter(t, b, b.dsn(t))
			if !mustTake(t, l, "acme", slow("k", 1)).OK || mustTake(t, l, "acme", slow("k", 1)).OK {
				t.Fatal("acme's bucket of 1 did not admit exactly one")
			}
			if !mustTake(t, l, "globex", slow("k", 1)).OK {
				t.Fatal("globex limited by acme's bucket")
			}
			if !mustTake(t, l, "acme", slow("k2", 1)).OK {
				t.Fatal("key k2 limited by k")
			}
		})
		t.Run("all or none", func(t *testing.T) {
			l := openLimiter(t, b, b.dsn(t))
			if !mustTake(t, l, "acme", slow("a", 5), slow("b", 1)).OK {
				t.Fatal("first take refused")
			}
			for range 3 {
				if v := mustTake(t, l, "acme", slow("a", 5), slow("b", 1)); v.OK || v.Key != "b" {
					t.Fatalf("b is empty: %+v", v)
				}
			}
			n := 0
			for mustTake(t, l, "acme", slow("a", 5)).OK {
				n++
			}
			if n != 4 {
				t.Fatalf("a had %d tokens left, want 4: refused takes must take nothing", n)
			}
		})
		t.Run("concurrent takers", func(t *testing.T) {
			l := openLimiter(t, b, b.dsn(t))
			limits := []ratelimit.Limit{slow("a", 20), slow("z", 30)}
			if n := concurrentTakes(t, []Limiter{l}, limits, 8, 10); n != 20 {
				t.Fatalf("%d takes admitted, want exactly the smaller burst, 20", n)
			}
		})
		t.Run("prune drops full buckets only", func(t *testing.T) {
			l := openLimiter(t, b, b.dsn(t))
			mustTake(t, l, "acme", ratelimit.Limit{Key: "fast", Rate: 1000, Burst: 1}) // full again after 1ms
			mustTake(t, l, "acme", slow("slow", 1))
			time.Sleep(20 * time.Millisecond)
			n, err := l.Prune(context.Background())
			if err != nil || n != 1 {
				t.Fatalf("Prune = %d, %v; want the one full bucket", n, err)
			}
			if mustTake(t, l, "acme", slow("slow", 1)).OK {
				t.Fatal("prune dropped a bucket that was not full")
			}
		})
	})
}

// Two gateways on one PostgreSQL database (replicas) take from the same
// buckets: a burst of 10 with no refill admits exactly 10 in all.
func TestPostgresReplicasShareBuckets(t *testing.T) {
	dsn := pgtest.DSN(t)
	b := backends[1]
	replicas := []Limiter{openLimiter(t, b, dsn), openLimiter(t, b, dsn)}
	if n := concurrentTakes(t, replicas, []ratelimit.Limit{{Key: "shared", Rate: 0.001, Burst: 10}}, 8, 5); n != 10 {
		t.Fatalf("%d takes admitted across two replicas, want exactly 10", n)
	}
}

// concurrentTakes runs workers goroutines, each taking limits times times
// through limiters (in turn), and returns how many takes were admitted.
func concurrentTakes(t *testing.T, limiters []Limiter, limits []ratelimit.Limit, workers, times int) int64 {
	t.Helper()
	var ok atomic.Int64
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			for range times {
				v, err := limiters[i%len(limiters)].Take(context.Background(), "acme", limits)
				if err != nil {
					t.Error(err)
					return
				}
				if v.OK {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return ok.Load()
}
