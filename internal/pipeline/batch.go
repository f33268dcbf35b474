package pipeline

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/prepare"
)

// BatchRequest is a batch of calls as the API received it: the parallel
// tool calls of one model turn.
type BatchRequest struct {
	Identity  *identity.Identity
	SessionID string
	Calls     []BatchCall
}

// BatchCall is one call of a batch. Arguments are raw bytes that only
// prepare decodes.
type BatchCall struct {
	Tool      string
	Arguments []byte
	// CallID is optional (generated when empty); one the caller chose is
	// an idempotency key, as for a single call.
	CallID string
}

// ErrToolPermanent is the failure of a batch one of whose calls ran and
// declared a permanent failure (Response.Permanent, an upstream's
// tools.ErrPermanent): the call's own result stands, its siblings are
// canceled, and the API answers 424 as for a single call.
var ErrToolPermanent = errors.New("the tool reported a permanent failure")

// BatchResponse holds one result per call, in request order. Err is the
// permanent failure (ErrPolicy, ErrAudit, ErrOverloaded, ErrToolPermanent,
// internal) that canceled the batch, nil when none; Failed is the index of
// the call that met it, or -1 when no call did (no policy loaded at all).
// The failed call's result is empty (it was not run) except for
// ErrToolPermanent, where it is the call's audited tool_error. When a
// call_id stopped the batch before any call was decided (IsKeyError), or
// the idempotency store failed then, Results is nil.
type BatchResponse struct {
	Results []Response
	Err     error
	Failed  int
}

// Batch decides every call of a batch and, when run is set, runs the
// allowed ones concurrently:
//
//   - availability is evaluated once per distinct tool, before any
//     argument is decoded;
//   - every call is prepared, decided and audited on its own;
//   - allowed calls run under the tenant's concurrency limit, and
//     availability is checked again when a call gets its slot;
//   - calls that touch the same target, one of them writing it, run in
//     request order, never at once (see conflicts);
//   - the first permanent failure (policy or audit failure, or a tool
//     that ran and declared a permanent failure) cancels every call that
//     has not finished: those are audited and answered as canceled, and
//     Err is the initiating failure, never a sibling's cancellation;
//   - a call held for approval is held as a single call is (its result
//     carries data.approval_id) and counts as finished;
//   - a call whose call_id has a recorded response answers it and is not
//     decided again (a recorded permanent failure fails the batch again);
//     a call_id used by another request fails the whole batch before any
//     call is decided (ErrKeyConflict, UnfinishedError; Results nil).
func (p *Pipeline) Batch(ctx context.Context, req BatchRequest, run bool) BatchResponse {
	mode := "decision"
	if run {
		mode = "call"
	}
	n := len(req.Calls)
	out := BatchResponse{Results: make([]Response, n), Failed: -1}
	rev, err := p.revision()
	if err != nil {
		p.o.Metrics.FailClosed.WithLabelValues(causeOf(err)).Inc()
		out.Err, out.Results = err, nil
		return out
	}
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b := &batch{cancel: cancel, failed: -1, results: out.Results, final: make([]bool, n)}

	calls := make([]*call, n)
	owned := false // the calls have spans of their own, to end
	for i, bc := range req.Calls {
		c := &call{
			req: Request{Identity: req.Identity, Tool: bc.Tool, Arguments: bc.Arguments, SessionID: req.SessionID, CallID: bc.CallID},
			run: run, rev: rev, callID: bc.CallID, decisionID: p.o.NewID(), durations: map[string]int64{},
			canceled: b.isFailed,
		}
		c.span, owned = p.batchCallSpan(ctx)
		if c.callID == "" {
			c.callID = p.o.NewID()
		}
		calls[i] = c
	}

	// Idempotency keys, before anything is decided.
	if i, err := p.claimBatch(ctx, b, calls); err != nil {
		for _, c := range calls {
			p.releaseKey(ctx, c)
		}
		out.Err, out.Failed, out.Results = err, -1, nil
		if IsKeyError(err) {
			out.Failed = i
		} else {
			p.o.Metrics.FailClosed.WithLabelValues(causeOf(err)).Inc()
		}
		return out
	}

	// Availability, once per distinct tool, before any argument is decoded.
	gates := map[string]*gate{}
	for i, c := range calls {
		if _, done := gates[c.req.Tool]; done || b.final[i] {
			continue
		}
		t0 := time.Now()
		g, err := p.admit(bctx, rev, req.Identity, req.SessionID, c.req.Tool)
		p.stage("availability", c, t0)
		if err != nil {
			b.fail(i, p.policyFailed(bctx, c, audit.PhaseDecision, err, p.availabilityInput(c)))
			break
		}
		gates[c.req.Tool] = g
	}

	// Prepare every call (no effect, nothing audited yet but refusals),
	// so that the targets of all calls are known before any decision.
	var wg sync.WaitGroup
	for i, c := range calls {
		if b.isFailed() {
			break
		}
		if b.final[i] {
			continue // answered from its idempotency key
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, final, err := p.prepareCall(bctx, c, gates[c.req.Tool])
			switch {
			case err != nil:
				b.fail(i, err)
			case final:
				b.finish(i, resp)
			}
		}()
	}
	wg.Wait()
	if !b.isFailed() {
		p.decideAndRun(bctx, b, calls, gates, run)
	}

	// Every call without a final result was canceled; each is audited.
	for i, c := range calls {
		if i == b.failed || b.final[i] {
			continue
		}
		b.results[i] = p.cancelCall(ctx, c)
	}
	// A tool's permanent failure is a result of a call that ran, not the
	// gateway failing closed.
	ran := errors.Is(b.err, ErrToolPermanent)
	for i, r := range b.results {
		if i != b.failed || ran {
			p.o.Metrics.Calls.WithLabelValues(mode, calls[i].toolLabel(), string(r.Outcome)).Inc()
		}
	}
	p.settleBatch(ctx, calls, b.results, b.failed, ran)
	if b.err != nil {
		out.Err, out.Failed = b.err, b.failed
		if !ran {
			p.o.Metrics.FailClosed.WithLabelValues(causeOf(b.err)).Inc()
			out.Results[b.failed] = Response{CallID: calls[b.failed].callID, DecisionID: calls[b.failed].decisionID}
		}
	}
	if owned {
		for i, c := range calls {
			var err error
			if i == out.Failed && !ran {
				err = out.Err
			}
			c.noteSpan(out.Results[i], err)
			c.span.End()
		}
	}
	return out
}

// decideAndRun decides each prepared call and, when run is set, runs the
// allowed ones. A call that conflicts with earlier ones waits until they
// are done, then is prepared again, so that its decision and its run see
// the state those calls left (a file the previous call created); the
// others are decided at once, concurrently, and their decision events share
// the audit log's group commits. A call to run then waits for a slot of the
// tenant and for availability once more.
func (p *Pipeline) decideAndRun(ctx context.Context, b *batch, calls []*call, gates map[string]*gate, run bool) {
	var deps [][]int
	if run {
		deps = conflicts(calls, b.final)
	} else {
		deps = make([][]int, len(calls)) // nothing runs: nothing to order
	}
	done := make([]chan struct{}, len(calls))
	for i := range done {
		done[i] = make(chan struct{})
	}
	// The calls that wait for no other are all decided before any of them
	// runs: a policy or audit failure in one of those decisions leaves
	// nothing run.
	// All of them are counted before the first starts: counted one by one
	// as they start, a fast first call could find the count at zero and
	// run before a later sibling's decision failed.
	var decided sync.WaitGroup
	for i, c := range calls {
		if c.prepared != nil && !b.final[i] && len(deps[i]) == 0 {
			decided.Add(1)
		}
	}
	var wg sync.WaitGroup
	for i, c := range calls {
		if c.prepared == nil || b.final[i] {
			close(done[i])
			continue
		}
		independent := len(deps[i]) == 0
		markDecided := func() {}
		if independent {
			markDecided = sync.OnceFunc(decided.Done)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done[i])
			defer markDecided()
			for _, j := range deps[i] {
				select {
				case <-done[j]:
				case <-ctx.Done():
					return
				}
			}
			if len(deps[i]) > 0 {
				resp, final, err := p.prepareCall(ctx, c, gates[c.req.Tool])
				switch {
				case err != nil:
					b.fail(i, err)
					return
				case final:
					b.finish(i, resp)
					return
				}
			}
			resp, a, err := p.decide(ctx, c)
			markDecided()
			if err != nil {
				b.fail(i, err)
				return
			}
			if a == nil {
				b.finish(i, resp)
				return
			}
			if independent {
				decided.Wait()
			}
			if b.isFailed() {
				return
			}
			release, err := p.slots.Acquire(ctx, c.req.Identity.Tenant)
			if err != nil {
				return // canceled while waiting: it never started
			}
			defer release()
			if resp, stop, err := p.recheck(ctx, c); err != nil {
				b.fail(i, err)
				return
			} else if stop {
				b.finish(i, resp)
				return
			}
			if b.isFailed() {
				return
			}
			resp = p.execute(ctx, c, a)
			if resp.Permanent {
				b.failRan(i, resp)
				return
			}
			b.finish(i, resp)
		}()
	}
	wg.Wait()
}

// recheck evaluates availability again, on the current policy revision,
// when a batch call gets its slot: a tool withdrawn while the call waited
// does not run. A withdrawn tool answers unavailable, with a result event.
func (p *Pipeline) recheck(ctx context.Context, c *call) (Response, bool, error) {
	rev, err := p.revision()
	if err != nil {
		return Response{}, false, err
	}
	t0 := time.Now()
	g, err := p.admit(ctx, rev, c.req.Identity, c.req.SessionID, c.req.Tool)
	p.stage("availability", c, t0)
	if err != nil {
		return Response{}, false, p.policyFailed(ctx, c, audit.PhaseResult, err, c.input)
	}
	if g.offered {
		return Response{}, false, nil
	}
	ev := p.event(c, audit.PhaseResult, apiv1.OutcomeUnavailable, []string{"availability withdrawn before the call ran: " + g.reason})
	ev.PolicyRevision = rev.ID()
	ev.Input = c.input
	if err := p.o.Audit.Append(context.WithoutCancel(ctx), ev); err != nil {
		p.o.Logger.Error("result event not written", "tenant", ev.Tenant, "call_id", c.callID, "err", err)
	}
	return Response{CallID: c.callID, DecisionID: c.decisionID, RequestDigest: c.prepared.Digest(),
		Outcome: apiv1.OutcomeUnavailable, Content: TextUnavailable, IsError: true}, true, nil
}

// cancelCall audits and answers a call that a sibling's failure stopped
// before it ran: a decision event when its decision was never committed,
// otherwise a result event after the committed allow. The batch context is
// canceled by now, so the events are written without it.
func (p *Pipeline) cancelCall(ctx context.Context, c *call) Response {
	phase := audit.PhaseDecision
	if c.decided {
		phase = audit.PhaseResult
	}
	ev := p.event(c, phase, apiv1.OutcomeCanceled, []string{ReasonCanceled})
	// Without a committed decision the mask is unknown: like a refused
	// call, the event carries the availability input only.
	switch {
	case c.decided:
		ev.Input = c.input
	case c.spec != nil:
		ev.Input = prepare.AvailabilityInput(c.req.Identity, c.req.SessionID, c.spec)
	default:
		ev.Input = map[string]any{"tool": map[string]any{"name": ev.Tool}}
	}
	if err := p.o.Audit.Append(context.WithoutCancel(ctx), ev); err != nil {
		p.o.Logger.Error("canceled event not written", "tenant", ev.Tenant, "call_id", c.callID, "err", err)
	}
	resp := Response{CallID: c.callID, DecisionID: c.decisionID, Outcome: apiv1.OutcomeCanceled, Content: TextCanceled, IsError: true,
		Data: map[string]any{"started": false}}
	if c.prepared != nil {
		resp.RequestDigest = c.prepared.Digest()
	}
	return resp
}

// batch is the shared state of one running batch.
type batch struct {
	mu      sync.Mutex
	cancel  context.CancelFunc
	err     error // the initiating permanent failure
	failed  int   // its call's index, -1 while none
	results []Response
	final   []bool
}

// fail records a permanent failure of call i. Only the first one cancels
// the batch and becomes its answer; a later one is a consequence (or a
// coincidence) and the call it hit is canceled like any sibling.
func (b *batch) fail(i int, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return
	}
	b.err, b.failed = err, i
	b.cancel()
}

// failRan records call i's final response, a permanent failure the tool
// declared after it ran: the first such failure (or any other) cancels the
// batch, as fail does.
func (b *batch) failRan(i int, r Response) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.results[i], b.final[i] = r, true
	if b.err != nil {
		return
	}
	b.err, b.failed = ErrToolPermanent, i
	b.cancel()
}

func (b *batch) isFailed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err != nil
}

// finish records call i's final response.
func (b *batch) finish(i int, r Response) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.results[i], b.final[i] = r, true
}

// claimBatch claims the idempotency key of every call of the batch whose
// call_id the caller chose. A call with a recorded response is finished
// with it: the recorded permanent failure of a call that ran fails the
// batch as it did the first time. The first call whose key cannot be
// claimed (a conflict, an unfinished first request, the store failing)
// is returned with its error.
//
// The keys are claimed one at a time in call_id order, waiting for a key
// another request holds while keeping those claimed before it: every
// batch takes its keys in the same order (a single call takes one), so
// two batches sharing call_ids never wait for each other in a cycle.
func (p *Pipeline) claimBatch(ctx context.Context, b *batch, calls []*call) (int, error) {
	if p.o.Keys == nil {
		return -1, nil
	}
	var order []int
	for i, c := range calls {
		if c.req.CallID != "" {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(i, j int) int { return strings.Compare(calls[i].callID, calls[j].callID) })
	for _, i := range order {
		c := calls[i]
		resp, replayed, err := p.claim(ctx, c)
		switch {
		case err != nil:
			return i, err
		case replayed && resp.Permanent && c.run:
			b.failRan(i, resp)
		case replayed:
			b.finish(i, resp)
		}
	}
	return -1, nil
}

// settleBatch records each call's response in its idempotency key, or
// releases the key of a call that never started: the call that failed the
// batch closed (unless it ran: ran) and the calls canceled before they
// started, so that a retry of the batch decides and runs them.
func (p *Pipeline) settleBatch(ctx context.Context, calls []*call, results []Response, failed int, ran bool) {
	var wg sync.WaitGroup
	for i, c := range calls {
		if c.keyLease.IsZero() {
			continue
		}
		r := results[i]
		wg.Go(func() {
			if i == failed && !ran || r.Outcome == apiv1.OutcomeCanceled && r.Data["started"] != true || r.Outcome == apiv1.OutcomeRateLimited {
				p.releaseKey(ctx, c)
				return
			}
			p.completeKey(ctx, c, r)
		})
	}
	wg.Wait()
}
