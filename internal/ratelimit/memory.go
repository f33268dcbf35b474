package ratelimit

import (
	"context"
	"sync"
	"time"
)

// sweepEvery is how often Memory drops full buckets (whose tat is past),
// so that keys policy made up once do not stay in memory.
const sweepEvery = time.Minute

// Memory is a Limiter that counts in this process: a map of theoretical
// arrival times under one mutex. It serves a gateway on SQLite (one
// process) and the per-tenant request limit (limits.tenant_rate), which
// protects each replica. Full buckets are dropped once a minute, so its
// size is bounded by the buckets used within about the last minute plus
// those still refilling.
type Memory struct {
	now       func() time.Time
	mu        sync.Mutex
	tat       map[bucket]int64 // unix nanoseconds
	lastSweep int64
}

type bucket struct{ tenant, key string }

// NewMemory returns an empty Memory reading the time from now (nil:
// time.Now).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, tat: map[bucket]int64{}}
}

var _ Limiter = (*Memory)(nil)

// Take implements Limiter. It never fails.
func (m *Memory) Take(_ context.Context, tenant string, limits []Limit) (Verdict, error) {
	now := m.now().UnixNano()
	m.mu.Lock()
	defer m.mu.Unlock()
	if now-m.lastSweep >= int64(sweepEvery) {
		m.sweep(now)
	}
	// First check every bucket, then take from all: all or none.
	next := make([]int64, len(limits))
	for i, l := range limits {
		tat := max(m.tat[bucket{tenant, l.Key}], now)
		if wait := tat - now - l.Tolerance(); wait > 0 {
			return Verdict{Key: l.Key, RetryAfter: time.Duration(wait)}, nil
		}
		next[i] = tat + l.Interval()
	}
	for i, l := range limits {
		m.tat[bucket{tenant, l.Key}] = next[i]
	}
	return Verdict{OK: true}, nil
}

// sweep drops the buckets that are full at now.
func (m *Memory) sweep(now int64) {
	for b, tat := range m.tat {
		if tat <= now {
			delete(m.tat, b)
		}
	}
	m.lastSweep = now
}

// Prune drops the buckets that are full now and returns how many (Take
// also does every minute).
func (m *Memory) Prune(context.Context) (int64, error) {
	now := m.now().UnixNano()
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.tat)
	m.sweep(now)
	return int64(n - len(m.tat)), nil
}

// Len is the number of buckets kept (tests check that idle ones go).
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.tat)
}
