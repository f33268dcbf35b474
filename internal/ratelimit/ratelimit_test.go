package ratelimit_test

import (
	"context"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/ratelimit"
)

// clock is a time source the test moves by hand.
type clock struct{ t atomic.Int64 }

func newClock() *clock {
	c := &clock{}
	c.t.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}
func (c *clock) now() time.Time      { return time.Unix(0, c.t.Load()) }
func (c *clock) add(d time.Duration) { c.t.Add(int64(d)) }
func take(t *testing.T, m ratelimit.Limiter, tenant string, ls ...ratelimit.Limit) ratelimit.Verdict {
	t.Helper()
	v, err := m.Take(context.Background(), tenant, ratelimit.Normalize(ls))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// drain takes from acme's bucket of l until it refuses and returns how
// many takes it admitted.
func drain(t *testing.T, m ratelimit.Limiter, l ratelimit.Limit) int {
	t.Helper()
	n := 0
	for take(t, m, "acme", l).OK {
		n++
	}
	return n
}

func TestBurstThenRefill(t *testing.T) {
	c := newClock()
	m := ratelimit.NewMemory(c.now)
	l := ratelimit.Limit{Key: "k", Rate: 2, Burst: 3} // a token every 500ms
	for i := range 3 {
		if v := take(t, m, "acme", l); !v.OK {
			t.Fatalf("request %d of the burst refused: %+v", i+1, v)
		}
	}
	v := take(t, m, "acme", l)
	if v.OK || v.Key != "k" || v.RetryAfter != 500*time.Millisecond {
		t.Fatalf("over the burst: %+v, want refused by k for 500ms", v)
	}
	c.add(499 * time.Millisecond)
	if v := take(t, m, "acme", l); v.OK || v.RetryAfter != time.Millisecond {
		t.Fatalf("1ms before the refill: %+v", v)
	}
	c.add(time.Millisecond)
	if v := take(t, m, "acme", l); !v.OK {
		t.Fatalf("after the refill: %+v", v)
	}
	if v := take(t, m, "acme", l); v.OK {
		t.Fatal("one refilled token admitted two requests")
	}
	// A long idle time refills the bucket to its burst, never beyond.
	c.add(time.Hour)
	if n := drain(t, m, l); n != 3 {
		t.Fatalf("after an hour idle %d requests passed, want the burst, 3", n)
	}
}

func TestTenantsAndKeysHaveTheirOwnBuckets(t *testing.T) {
	m := ratelimit.NewMemory(newClock().now)
	l := ratelimit.Limit{Key: "k", Rate: 0.001, Burst: 1}
	if !take(t, m, "acme", l).OK || take(t, m, "acme", l).OK {
		t.Fatal("acme's bucket of 1 did not admit exactly one")
	}
	if !take(t, m, "globex", l).OK {
		t.Fatal("globex was limited by acme's bucket")
	}
	if !take(t, m, "acme", ratelimit.Limit{Key: "other", Rate: 0.001, Burst: 1}).OK {
		t.Fatal("another key was limited by k's bucket")
	}
}

func TestAllOrNone(t *testing.T) {
	m := ratelimit.NewMemory(newClock().now)
	wide := ratelimit.Limit{Key: "a-wide", Rate: 0.001, Burst: 10}
	narrow := ratelimit.Limit{Key: "b-narrow", Rate: 0.001, Burst: 1}
	if !take(t, m, "acme", wide, narrow).OK {
		t.Fatal("first request refused")
	}
	for range 5 {
		v := take(t, m, "acme", wide, narrow)
		if v.OK || v.Key != "b-narrow" {
			t.Fatalf("narrow bucket empty: %+v", v)
		}
	}
	// The refused requests took nothing from the wide bucket: 9 left.
	if n := drain(t, m, wide); n != 9 {
		t.Fatalf("wide bucket had %d tokens left, want 9 (refused requests must take none)", n)
	}
}

func TestNormalizeKeepsTheStrictestPerKey(t *testing.T) {
	got := ratelimit.Normalize([]ratelimit.Limit{
		{Key: "z", Rate: 5, Burst: 1},
		{Key: "a", Rate: 10, Burst: 2},
		{Key: "z", Rate: 1, Burst: 7},
	})
	want := []ratelimit.Limit{{Key: "a", Rate: 10, Burst: 2}, {Key: "z", Rate: 1, Burst: 1}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Normalize = %+v, want %+v", got, want)
	}
}

func TestValidate(t *testing.T) {
	bad := map[string]ratelimit.Limit{
		"empty key":      {Key: "", Rate: 1, Burst: 1},
		"long key":       {Key: strings.Repeat("k", 257), Rate: 1, Burst: 1},
		"NUL in key":     {Key: "a\x00b", Rate: 1, Burst: 1},
		"invalid UTF-8":  {Key: "a\xffb", Rate: 1, Burst: 1},
		"zero rate":      {Key: "k", Rate: 0, Burst: 1},
		"negative rate":  {Key: "k", Rate: -1, Burst: 1},
		"NaN rate":       {Key: "k", Rate: math.NaN(), Burst: 1},
		"infinite rate":  {Key: "k", Rate: math.Inf(1), Burst: 1},
		"huge rate":      {Key: "k", Rate: 1e7, Burst: 1},
		"burst below 1":  {Key: "k", Rate: 1, Burst: 0.5},
		"negative burst": {Key: "k", Rate: 1, Burst: -3},
		"NaN burst":      {Key: "k", Rate: 1, Burst: math.NaN()},
		"huge burst":     {Key: "k", Rate: 1, Burst: 1e7},
		// Values that would overflow the nanosecond arithmetic.
		"tiny rate":           {Key: "k", Rate: 1e-300, Burst: 1},
		"rate below MinRate":  {Key: "k", Rate: 1e-7, Burst: 1},
		"window of centuries": {Key: "k", Rate: 1e-6, Burst: 1e6},
	}
	for name, l := range bad {
		if err := l.Validate(); err == nil {
			t.Errorf("%s: %+v validated", name, l)
		}
	}
	for _, l := range []ratelimit.Limit{{Key: "k", Rate: 0.0001, Burst: 1}, {Key: strings.Repeat("é", 128), Rate: 1e6, Burst: 1e6}, {Key: "k", Rate: 1e-6, Burst: 1000}} {
		if err := l.Validate(); err != nil {
			t.Errorf("%+v: %v", l, err)
		}
	}
}

func TestIdleBucketsAreDropped(t *testing.T) {
	c := newClock()
	m := ratelimit.NewMemory(c.now)
	for i := range 100 {
		take(t, m, "acme", ratelimit.Limit{Key: "k" + string(rune('a'+i%26)) + strings.Repeat("x", i), Rate: 10, Burst: 5})
	}
	if m.Len() != 100 {
		t.Fatalf("Len = %d, want 100", m.Len())
	}
	c.add(2 * time.Minute) // every bucket refilled long ago
	take(t, m, "acme", ratelimit.Limit{Key: "fresh", Rate: 10, Burst: 5})
	if m.Len() != 1 {
		t.Fatalf("after the sweep Len = %d, want 1", m.Len())
	}
}

// Concurrent takers never get more than the burst out of a bucket that
// does not refill meanwhile.
func TestConcurrentTakersShareOneBucket(t *testing.T) {
	m := ratelimit.NewMemory(newClock().now)
	l := []ratelimit.Limit{{Key: "k", Rate: 0.001, Burst: 25}}
	var ok atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 10 {
				if v, _ := m.Take(context.Background(), "acme", l); v.OK {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if ok.Load() != 25 {
		t.Fatalf("%d requests admitted, want exactly the burst, 25", ok.Load())
	}
}

func TestRetrySeconds(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		0: 1, time.Nanosecond: 1, time.Second: 1, time.Second + 1: 2, 1500 * time.Millisecond: 2, 1000 * time.Second: 1000,
	} {
		if got := ratelimit.RetrySeconds(d); got != want {
			t.Errorf("RetrySeconds(%v) = %d, want %d", d, got, want)
		}
	}
}

// BenchmarkMemoryTake is one admitted take from one of 1,000 buckets of a
// tenant, the in-process cost a rate-limited call adds (-race off).
func BenchmarkMemoryTake(b *testing.B) {
	m := ratelimit.NewMemory(nil)
	limits := make([][]ratelimit.Limit, 1000)
	for i := range limits {
		limits[i] = []ratelimit.Limit{{Key: "k" + strings.Repeat("x", i%50) + string(rune('a'+i%26)), Rate: 1e6, Burst: 1e6}}
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := m.Take(ctx, "acme", limits[i%len(limits)]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// The extreme limits Validate accepts still count correctly: no overflow
// of the nanosecond arithmetic.
func TestExtremeLimitsCount(t *testing.T) {
	c := newClock()
	m := ratelimit.NewMemory(c.now)
	slowest := ratelimit.Limit{Key: "slow", Rate: ratelimit.MinRate, Burst: 1000}
	if err := slowest.Validate(); err != nil {
		t.Fatal(err)
	}
	if n := drain(t, m, slowest); n != 1000 {
		t.Fatalf("slowest bucket admitted %d, want 1000", n)
	}
	v := take(t, m, "acme", slowest)
	if v.OK || v.RetryAfter < 1e6*time.Second-time.Second || v.RetryAfter > 1e6*time.Second {
		t.Fatalf("after the burst: %+v, want a wait of 1e6 s", v)
	}
	fastest := ratelimit.Limit{Key: "fast", Rate: ratelimit.MaxRate, Burst: ratelimit.MaxBurst}
	if n := drain(t, m, fastest); n != 1e6 {
		t.Fatalf("fastest bucket admitted %d, want 1e6", n)
	}
}
