package invoke

import (
	"context"
	"sync"
	"sync/atomic"
)

// TenantSlots is a counting semaphore per tenant: at most size holders of
// one tenant at once, whatever the other tenants do. The gateway uses it
// twice, with different sizes: for the batch calls of a tenant
// (limits.tenant_concurrency, in the pipeline) and for its command-tool
// calls (limits.tenant_commands, here in Invoke). Tenants come from the
// configuration, so the map stays as small as the tenant list.
type TenantSlots struct {
	size    int
	mu      sync.Mutex
	byName  map[string]chan struct{}
	waiting atomic.Int64 // callers blocked in Acquire, for tests and metrics
}

// NewTenantSlots returns slots of size per tenant; size must be positive.
func NewTenantSlots(size int) *TenantSlots {
	if size <= 0 {
		panic("invoke: tenant slots need a positive size")
	}
	return &TenantSlots{size: size, byName: map[string]chan struct{}{}}
}

// Size is how many slots each tenant has.
func (s *TenantSlots) Size() int { return s.size }

// Waiting is how many callers are blocked in Acquire right now.
func (s *TenantSlots) Waiting() int64 { return s.waiting.Load() }

// Acquire takes one of tenant's slots, or fails with ctx's error when ctx
// ends first. release gives the slot back; call it exactly once.
func (s *TenantSlots) Acquire(ctx context.Context, tenant string) (release func(), err error) {
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
