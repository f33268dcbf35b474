package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/decision"
	"github.com/toolgate/toolgate/internal/ratelimit"
)

// TextRateLimited is the content of a rate-limited call.
const TextRateLimited = "rate limited"

// Limit names: the label of toolgate_rate_limited_total and
// LimitError.Limit.
const (
	LimitPolicy     = "policy"      // the rate_limit obligation
	LimitTenantRate = "tenant_rate" // limits.tenant_rate (internal/api)
	LimitMaxPending = "max_pending" // approvals.max_pending
	LimitLongPolls  = "long_polls"  // limits.tenant_long_polls
)

// Defaults of Options.MaxPending and Options.MaxTenantPolls.
const (
	DefaultMaxPending     = 1000
	DefaultMaxTenantPolls = 100
)

// MaxPendingRetryAfter is the Retry-After of a call refused by
// approvals.max_pending: a slot frees when a human decides, or a held
// call expires, which is no matter of a second.
const MaxPendingRetryAfter = 30 * time.Second

// ErrLimits: the rate_limit obligation's buckets could not be counted
// (the database did not answer): the call fails closed, nothing ran.
var ErrLimits = errors.New("rate limits unavailable")

// LimitError is a request that a limit refused before anything ran and
// before anything was recorded (a long poll beyond limits.tenant_long_polls).
// The API answers 429 rate_limited with Retry-After.
type LimitError struct {
	Limit      string // LimitLongPolls, …
	RetryAfter time.Duration
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("limit %s reached; retry after %s", e.Limit, e.RetryAfter)
}

// limit applies to a decided call the limits that hold before its
// decision event: approvals.max_pending for a call that would be held
// (hold) or ask its user, then the rate_limit obligation. It returns the
// audit reason and Retry-After of a refusal, or "" when the call may go
// on. Only calls allowed or held count: a denial takes no token. A PDP
// decision (/decisions) counts like a call: its allow is the platform's
// licence to run the tool.
func (p *Pipeline) limit(ctx context.Context, c *call, outcome apiv1.Outcome, dec decision.Decision, hold bool) (string, time.Duration, error) {
	if outcome != apiv1.OutcomeAllow && outcome != apiv1.OutcomeApprovalRequired {
		return "", 0, nil
	}
	tenant := c.req.Identity.Tenant
	if hold || c.run && outcome == apiv1.OutcomeAllow && p.asks(c) {
		full, err := p.pendingFull(ctx, tenant)
		if err != nil {
			p.o.Logger.Error("counting pending approvals failed closed", "tenant", tenant, "call_id", c.callID, "err", err)
			return "", 0, fmt.Errorf("%w: %v", ErrAudit, err)
		}
		if full != "" {
			return full, MaxPendingRetryAfter, nil
		}
	}
	limits := dec.Obligations.RateLimits
	if len(limits) == 0 {
		return "", 0, nil
	}
	t0 := time.Now()
	v, err := p.o.Limiter.Take(ctx, tenant, limits)
	p.stage("limit", c, t0)
	if err != nil {
		p.o.Logger.Error("rate limit failed closed", "tenant", tenant, "call_id", c.callID, "err", err)
		return "", 0, fmt.Errorf("%w: %v", ErrLimits, err)
	}
	if v.OK {
		return "", 0, nil
	}
	p.o.Metrics.RateLimited.WithLabelValues(LimitPolicy).Inc()
	return fmt.Sprintf("rate limit %q exceeded (retry after %ds)", v.Key, ratelimit.RetrySeconds(v.RetryAfter)), v.RetryAfter, nil
}

// pendingFull returns the audit reason when the tenant's pending held
// calls and questions have reached approvals.max_pending, else "". The
// caller holds p.pending's lock of the tenant until the row it admits is
// committed (or given up), so that concurrent holds on this replica cannot
// all pass the bound together.
func (p *Pipeline) pendingFull(ctx context.Context, tenant string) (string, error) {
	if p.o.Approvals == nil {
		return "", nil
	}
	n, err := p.o.Approvals.Pending(ctx, tenant, p.o.Now())
	if err != nil {
		return "", err
	}
	if n < p.o.MaxPending {
		return "", nil
	}
	p.o.Metrics.RateLimited.WithLabelValues(LimitMaxPending).Inc()
	return "approvals.max_pending reached: " + strconv.Itoa(n) + " held calls and questions are pending", nil
}

// tenantLocks is one mutex per tenant (tenants are configured, so the map
// stays small).
type tenantLocks struct{ m sync.Map }

// lock locks tenant's mutex and returns its unlock.
func (l *tenantLocks) lock(tenant string) (unlock func()) {
	mu, _ := l.m.LoadOrStore(tenant, &sync.Mutex{})
	mu.(*sync.Mutex).Lock()
	return mu.(*sync.Mutex).Unlock
}

// asks reports whether c's tool asks its user (ask-user): its run stores
// a question, which approvals.max_pending bounds.
func (p *Pipeline) asks(c *call) bool {
	tool, _ := p.o.Registry.Lookup(c.spec.Name)
	_, ok := tool.(asker)
	return ok
}

// rateLimited is the response of a call a limit refused.
func rateLimited(resp Response, retry time.Duration) Response {
	resp.Outcome, resp.Content, resp.IsError = apiv1.OutcomeRateLimited, TextRateLimited, true
	resp.RetryAfter = retry
	resp.Data = map[string]any{"retry_after": ratelimit.RetrySeconds(retry)}
	return resp
}

// tenantCounter bounds how many of something each tenant has at once.
type tenantCounter struct {
	mu  sync.Mutex
	max int
	n   map[string]int
}

// acquire takes one of tenant's slots; ok is false when all max are
// taken. release gives it back, once.
func (tc *tenantCounter) acquire(tenant string) (release func(), ok bool) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.n == nil {
		tc.n = map[string]int{}
	}
	if tc.n[tenant] >= tc.max {
		return nil, false
	}
	tc.n[tenant]++
	return sync.OnceFunc(func() {
		tc.mu.Lock()
		defer tc.mu.Unlock()
		if tc.n[tenant]--; tc.n[tenant] <= 0 {
			delete(tc.n, tenant)
		}
	}), true
}

// count is how many slots tenant holds (tests).
func (tc *tenantCounter) count(tenant string) int {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.n[tenant]
}
