package pipeline

import (
	"context"
	"sync"
	"sync/atomic"
)

// slots is a counting semaphore per tenant: how many batch calls of the
// tenant run at once.
type slots struct {
	size    int
	mu      sync.Mutex
	byName  map[string]chan struct{}
	waiting atomic.Int64 // calls blocked in acquire, for tests and metrics
}

func newSlots(size int) *slots {
	return &slots{size: size, byName: map[string]chan struct{}{}}
}

// acquire takes one of tenant's slots, or fails when ctx ends first.
func (s *slots) acquire(ctx context.Context, tenant string) (release func(), err error) {
	s.mu.Lock()
	sem, ok := s.byName[tenant]
	if !ok {
		sem = make(chan struct{}, s.size)
		s.byName[tenant] = sem
	}
	s.mu.Unlock()
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	default:
	}
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
