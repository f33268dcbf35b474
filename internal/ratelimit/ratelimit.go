// Package ratelimit counts token buckets per (tenant, key) for the
// rate_limit obligation and the gateway's own per-tenant request limit.
//
// A bucket is kept as one number, its theoretical arrival time (GCRA, the
// generic cell rate algorithm): with an emission interval T = 1/rate and a
// tolerance τ = (burst-1)·T, a request at time t is admitted when
// max(tat, t) - t ≤ τ, and then tat becomes max(tat, t) + T. That is
// exactly a bucket of burst tokens refilled at rate tokens per second, but
// its whole state is one timestamp: a row of a table (internal/store, on
// PostgreSQL, shared by replicas) or an entry of a map (Memory, in
// process), updated in one step. A bucket whose tat is in the past is full
// and is the same as no bucket, so idle buckets can be dropped at any time.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Bounds of a Limit (Validate). They keep every bucket's arithmetic in
// int64 nanoseconds: one token takes at most 1e6 s (MinRate), a full
// bucket at most MaxWindow seconds (Burst/Rate) to refill.
const (
	MaxKeyBytes = 256
	MinRate     = 1e-6 // per second: one token every ~11.6 days
	MaxRate     = 1e6  // per second: an emission interval of 1 µs
	MaxBurst    = 1e6
	MaxWindow   = 1e9 // seconds (~31.7 years) for Burst/Rate
)

// Limit is one bucket class: Rate tokens per second refill a bucket of
// Burst tokens; each admitted request takes one.
type Limit struct {
	Key   string
	Rate  float64
	Burst float64
}

// Validate checks a limit as policy stated it: a non-empty key of at most
// MaxKeyBytes of UTF-8 without NUL, MinRate ≤ Rate ≤ MaxRate,
// 1 ≤ Burst ≤ MaxBurst, Burst/Rate ≤ MaxWindow.
// Burst below 1 would refuse every request: that is a denial, which policy
// says with allow: false.
func (l Limit) Validate() error {
	switch {
	case l.Key == "":
		return errors.New(`"key" is empty`)
	case len(l.Key) > MaxKeyBytes:
		return fmt.Errorf(`"key" is longer than %d bytes`, MaxKeyBytes)
	case !utf8.ValidString(l.Key) || strings.IndexByte(l.Key, 0) >= 0:
		return errors.New(`"key" is not valid text`)
	case !(l.Rate > 0) || l.Rate > MaxRate || math.IsInf(l.Rate, 0):
		return fmt.Errorf(`"rate" is %v, want a number of requests per second above 0 and at most %g`, l.Rate, float64(MaxRate))
	case l.Rate < MinRate:
		return fmt.Errorf(`"rate" is %v, below the smallest rate, %g per second`, l.Rate, float64(MinRate))
	case !(l.Burst >= 1) || l.Burst > MaxBurst || math.IsInf(l.Burst, 0):
		return fmt.Errorf(`"burst" is %v, want a number from 1 to %g`, l.Burst, float64(MaxBurst))
	case l.Burst/l.Rate > MaxWindow:
		return fmt.Errorf(`"burst" / "rate" is %g s, want at most %g s to refill the bucket`, l.Burst/l.Rate, float64(MaxWindow))
	}
	return nil
}

// Interval is T, the time one token takes to refill, in nanoseconds (at
// least 1).
func (l Limit) Interval() int64 {
	return max(int64(math.Round(float64(time.Second)/l.Rate)), 1)
}

// Tolerance is τ = (Burst-1)·T in nanoseconds: how far ahead of now a
// bucket's tat may run and still admit a request.
func (l Limit) Tolerance() int64 {
	return int64(math.Round((l.Burst - 1) * float64(l.Interval())))
}

// Normalize returns limits sorted by key with one limit per key: the
// strictest rate and the strictest burst of those that name it (several
// rules of a policy may name one bucket). Sorted keys also give a
// database a fixed lock order.
func Normalize(limits []Limit) []Limit {
	sorted := slices.Clone(limits)
	slices.SortStableFunc(sorted, func(a, b Limit) int { return strings.Compare(a.Key, b.Key) })
	out := sorted[:0]
	for _, l := range sorted {
		if n := len(out); n > 0 && out[n-1].Key == l.Key {
			out[n-1].Rate = min(out[n-1].Rate, l.Rate)
			out[n-1].Burst = min(out[n-1].Burst, l.Burst)
			continue
		}
		out = append(out, l)
	}
	return out
}

// Verdict is the answer of Take.
type Verdict struct {
	// OK: every bucket admitted the request and gave one token.
	OK bool
	// Key is the bucket that refused (when not OK).
	Key string
	// RetryAfter is how long until that bucket admits a request (when not
	// OK); another bucket of the same request may still refuse then.
	RetryAfter time.Duration
}

// Limiter counts buckets per (tenant, key). Take takes one token from the
// bucket of every limit, all or none: when any bucket refuses, no bucket
// gives a token. limits are normalized (Normalize) and valid (Validate).
type Limiter interface {
	Take(ctx context.Context, tenant string, limits []Limit) (Verdict, error)
}

// Pruner is a Limiter that can drop its full buckets (which mean the same
// as none); Prune returns how many it dropped.
type Pruner interface {
	Prune(ctx context.Context) (int64, error)
}

// RetrySeconds is d as a Retry-After value: whole seconds, rounded up, at
// least 1.
func RetrySeconds(d time.Duration) int64 {
	s := int64((d + time.Second - 1) / time.Second)
	return max(s, 1)
}
