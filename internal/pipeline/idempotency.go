package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/approval"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/idempotency"
	"github.com/toolgate/toolgate/internal/invoke"
)

// A call_id the caller chose is an idempotency key (docs/http-api.md
// "Retries and idempotency"): the first request with it reserves the key
// before its call is decided, and records the response it answered; a
// retry answers that response without deciding or running anything again.

// Defaults of the idempotency options.
const (
	// DefaultKeyTTL is how long a key is kept after its response was
	// recorded (limits.idempotency_ttl).
	DefaultKeyTTL = 24 * time.Hour
	// DefaultKeyLease bounds how long a key may stay reserved without a
	// recorded response: longer than any call runs (tool timeouts,
	// waiting for a batch slot). A key still pending after it was
	// abandoned: its gateway stopped while the call was decided or ran.
	DefaultKeyLease = 15 * time.Minute
	// DefaultKeyPoll is how often a retry waiting for the first request
	// re-reads the key, which another replica may complete (a completion
	// on this replica wakes it at once).
	DefaultKeyPoll = 100 * time.Millisecond
)

// ErrKeyConflict: the call_id was already used by another request of the
// tenant: another tool, other arguments, another session or principal, or
// a decision where this is a call (or the reverse). Nothing was decided.
var ErrKeyConflict = errors.New("call_id already used by another request")

// ErrKeyWait: the request ended while it waited for the first request
// with its call_id to finish. Nothing was decided.
var ErrKeyWait = errors.New("the first request with this call_id is still running")

// UnfinishedError is a retry of a call whose first request never
// finished: its key is still reserved past its lease (the gateway that
// ran it stopped). Nothing is decided again. Started says what the audit
// log shows: true when the first request's allow decision was committed,
// so the tool may have run (its result may be audited too); false when it
// stopped before that, so nothing ran.
type UnfinishedError struct {
	CallID     string
	DecisionID string // of the first request
	Started    bool
	// Outcome is the first request's last audited outcome ("" when none
	// was audited).
	Outcome apiv1.Outcome
}

func (e *UnfinishedError) Error() string {
	if e.Started {
		return "the first request with call_id " + e.CallID + " did not finish; its allow decision was committed, so the tool may have run"
	}
	return "the first request with call_id " + e.CallID + " did not finish; it stopped before it was allowed, so nothing ran"
}

// IsKeyError reports whether err is about the call_id as an idempotency
// key (a conflict, an unfinished first request, or a wait that ended),
// not the gateway failing closed.
func IsKeyError(err error) bool {
	var u *UnfinishedError
	return errors.Is(err, ErrKeyConflict) || errors.Is(err, ErrKeyWait) || errors.As(err, &u)
}

// recorded is a response as a key keeps it.
type recorded struct {
	CallID        string         `json:"call_id"`
	DecisionID    string         `json:"decision_id"`
	Outcome       apiv1.Outcome  `json:"outcome"`
	Content       string         `json:"content"`
	IsError       bool           `json:"is_error"`
	Data          map[string]any `json:"data,omitempty"`
	RequestDigest string         `json:"request_digest,omitempty"`
	Permanent     bool           `json:"permanent,omitempty"`
}

func encodeResponse(r Response) ([]byte, error) {
	return json.Marshal(recorded{
		CallID: r.CallID, DecisionID: r.DecisionID, Outcome: r.Outcome, Content: r.Content, IsError: r.IsError,
		Data: r.Data, RequestDigest: r.RequestDigest, Permanent: r.Permanent,
	}, json.Deterministic(true))
}

func decodeResponse(b []byte) (Response, error) {
	var r recorded
	if err := json.Unmarshal(b, &r); err != nil {
		return Response{}, err
	}
	return Response{
		CallID: r.CallID, DecisionID: r.DecisionID, Outcome: r.Outcome, Content: r.Content, IsError: r.IsError,
		Data: r.Data, RequestDigest: r.RequestDigest, Permanent: r.Permanent,
	}, nil
}

func (c *call) mode() string {
	if c.run {
		return "call"
	}
	return "decision"
}

// claim makes c's call_id, when the caller chose one, this request's
// idempotency key. It returns replayed true with the response to answer
// when the key already has one (after waiting for the first request when
// it is still running); replayed false when c holds the key now
// (c.keyLease set) or has none, and may go on. A store it cannot reach fails
// closed (ErrAudit): no call runs without its key.
func (p *Pipeline) claim(ctx context.Context, c *call) (Response, bool, error) {
	if p.o.Keys == nil || c.req.CallID == "" {
		return Response{}, false, nil
	}
	id := c.req.Identity
	fp := idempotency.Fingerprint(idempotency.Request{
		Mode: c.mode(), Tool: c.req.Tool, Arguments: c.req.Arguments, SessionID: c.req.SessionID, Principal: id.Principal,
	})
	for {
		now := p.o.Now()
		cur, err := p.o.Keys.Reserve(ctx, &idempotency.Key{
			Tenant: id.Tenant, CallID: c.callID, Fingerprint: fp, DecisionID: c.decisionID,
			State: idempotency.StatePending, CreatedAt: now, LeaseUntil: now.Add(p.o.KeyLease),
			ExpiresAt: now.Add(p.o.KeyLease + p.o.KeyTTL),
		}, now)
		if err != nil {
			p.o.Logger.Error("idempotency key not reserved; failing closed", "tenant", id.Tenant, "call_id", c.callID, "err", err)
			// The reservation may have committed all the same (the
			// connection broke after the statement was sent): release it
			// as a call that failed closed does, or every retry would wait
			// for the whole lease. A key that was never written is not
			// held, which the release takes as done.
			c.keyLease = now.Add(p.o.KeyLease)
			p.releaseKey(ctx, c)
			return Response{}, false, fmt.Errorf("%w: %v", ErrAudit, err)
		}
		if cur == nil {
			c.keyLease = now.Add(p.o.KeyLease)
			return Response{}, false, nil
		}
		resp, replayed, err := p.await(ctx, c, fp, cur)
		var u *UnfinishedError
		switch {
		case errors.Is(err, ErrKeyConflict):
			p.o.Metrics.Idempotency.WithLabelValues("conflict").Inc()
		case errors.As(err, &u):
			p.o.Metrics.Idempotency.WithLabelValues("unfinished").Inc()
		case err == nil && replayed:
			p.o.Metrics.Idempotency.WithLabelValues("replayed").Inc()
		}
		if err != nil || replayed {
			return resp, replayed, err
		}
		// The first request failed closed and released the key: this one
		// decides now.
	}
}

// await waits until the key cur of c has a response, then answers it. It
// returns replayed false when the key was released meanwhile.
func (p *Pipeline) await(ctx context.Context, c *call, fp string, cur *idempotency.Key) (Response, bool, error) {
	tenant := c.req.Identity.Tenant
	wakeKey := callKey(tenant, c.callID)
	logged := false
	for {
		if cur.Fingerprint != fp {
			return Response{}, false, ErrKeyConflict
		}
		now := p.o.Now()
		switch {
		case cur.State == idempotency.StateDone:
			resp, err := decodeResponse(cur.Response)
			if err != nil {
				return Response{}, false, fmt.Errorf("%w: recorded response of call_id %s: %v", errInternal, c.callID, err)
			}
			resp, err = p.current(ctx, c, resp)
			return resp, err == nil, err
		case cur.Abandoned(now):
			return Response{}, false, p.unfinished(ctx, c, cur)
		}
		// Subscribe before reading again, so that a completion on this
		// replica in between still wakes us.
		ch, release, _ := p.keyWaits.subscribe(wakeKey)
		next, err := p.o.Keys.Get(ctx, tenant, c.callID)
		if err == nil && next.State == idempotency.StatePending && !next.Abandoned(now) && next.Fingerprint == fp {
			if !logged {
				logged = true
				p.o.Metrics.Idempotency.WithLabelValues("waited").Inc()
				p.o.Logger.Debug("retry waits for the first request with its call_id", "tenant", tenant,
					"call_id", c.callID, "decision_id", next.DecisionID)
			}
			wait := min(p.o.KeyPoll, next.LeaseUntil.Sub(now))
			t := time.NewTimer(wait)
			select {
			case <-ch:
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				release()
				return Response{}, false, fmt.Errorf("%w: %v", ErrKeyWait, ctx.Err())
			}
			t.Stop()
			next, err = p.o.Keys.Get(ctx, tenant, c.callID)
		}
		release()
		switch {
		case errors.Is(err, idempotency.ErrNotFound):
			return Response{}, false, nil
		case err != nil && ctx.Err() != nil:
			return Response{}, false, fmt.Errorf("%w: %v", ErrKeyWait, ctx.Err())
		case err != nil:
			return Response{}, false, fmt.Errorf("%w: %v", ErrAudit, err)
		}
		cur = next
	}
}

// current is a recorded response as a retry answers it. A held call or an
// ask-user call answers its current state, the one GET /v1/calls/{id}
// shows, and is never held or asked again: still waiting, the recorded
// response; approved and run, the tool's result; denied by an approver
// or expired, denied with data.status saying which; answered, ok with the
// answer.
func (p *Pipeline) current(ctx context.Context, c *call, r Response) (Response, error) {
	if !c.run || (r.Outcome != apiv1.OutcomeApprovalRequired && r.Outcome != apiv1.OutcomeAwaitingUser) {
		return r, nil
	}
	st, err := p.callState(ctx, c.req.Identity, c.callID)
	if errors.Is(err, ErrCallNotFound) {
		return r, nil // never held (no approval store), or an expired question
	}
	if err != nil {
		return Response{}, err
	}
	if a := st.Approval; a != nil {
		switch out := CallOutcome(a); out {
		case apiv1.OutcomePending:
		case apiv1.OutcomeDenied, apiv1.OutcomeExpired:
			status := approval.StatusDenied
			if out == apiv1.OutcomeExpired {
				status = approval.StatusExpired
			}
			r.Outcome, r.Content, r.IsError = apiv1.OutcomeDenied, TextDenied, true
			r.Data = map[string]any{"approval_id": a.ID, "status": status}
		default:
			r.Outcome, r.Content, r.IsError, r.Data = out, invoke.ToolFailed, true, nil
			if a.Result != nil {
				r.Content, r.IsError, r.Data = a.Result.Content, a.Result.IsError, a.Result.Data
			}
		}
		return r, nil
	}
	if q := st.Question; q != nil && q.Status == approval.QuestionAnswered {
		r.Outcome, r.Content, r.IsError = apiv1.OutcomeOK, q.Answer, false
		r.Data = map[string]any{"question_id": q.ID, "answered_by": q.AnsweredBy, "answered_at": audit.FormatTime(q.AnsweredAt)}
	}
	return r, nil
}

// unfinished says what became of the first request of an abandoned key,
// from the audit log: the events of its decision id, read at once (also
// those not yet integrated).
func (p *Pipeline) unfinished(ctx context.Context, c *call, k *idempotency.Key) error {
	page, err := p.o.Audit.Query(ctx, k.Tenant, audit.Filter{CallID: k.CallID, DecisionID: k.DecisionID, Limit: 100})
	if err != nil {
		return fmt.Errorf("%w: %v", ErrAudit, err)
	}
	u := &UnfinishedError{CallID: k.CallID, DecisionID: k.DecisionID}
	for _, ev := range page.Events { // newest first
		if u.Outcome == "" {
			u.Outcome = apiv1.Outcome(ev.Outcome)
		}
		if ev.Phase == audit.PhaseResult || ev.Phase == audit.PhaseDecision && apiv1.Outcome(ev.Outcome) == apiv1.OutcomeAllow {
			u.Started = true
		}
	}
	p.o.Logger.Warn("retry of an unfinished call", "tenant", k.Tenant, "call_id", k.CallID,
		"decision_id", k.DecisionID, "started", u.Started, "outcome", u.Outcome)
	return u
}

// settle records what c answered as its key's response, or, when c failed
// closed before anything ran (err set), releases the key so that a retry
// decides again; then it wakes the retries waiting on this replica.
func (p *Pipeline) settle(ctx context.Context, c *call, resp Response, err error) {
	// A call that failed closed, or that a limit refused, did not run: its
	// retry (which a 429's Retry-After asks for) is decided anew.
	if err != nil || resp.Outcome == apiv1.OutcomeRateLimited {
		p.releaseKey(ctx, c)
		return
	}
	p.completeKey(ctx, c, resp)
}

func (p *Pipeline) completeKey(ctx context.Context, c *call, resp Response) {
	if c.keyLease.IsZero() {
		return
	}
	b, err := encodeResponse(resp)
	if err != nil {
		// A retry of it answers UnfinishedError once the lease is over.
		p.o.Metrics.Idempotency.WithLabelValues("unsettled").Inc()
		p.o.Logger.Error("idempotency key's response not encoded", "tenant", c.req.Identity.Tenant, "call_id", c.callID,
			"decision_id", c.decisionID, "err", err)
		c.keyLease = time.Time{}
		return
	}
	tenant, callID, decisionID := c.req.Identity.Tenant, c.callID, c.decisionID
	// The call is over: its response is recorded whatever the caller does
	// now.
	p.keyWrite(c, "recorded", func(ctx context.Context) error {
		return p.o.Keys.Complete(ctx, tenant, callID, decisionID, b, p.o.Now().Add(p.o.KeyTTL))
	})
}

func (p *Pipeline) releaseKey(ctx context.Context, c *call) {
	if c.keyLease.IsZero() {
		return
	}
	tenant, callID, decisionID := c.req.Identity.Tenant, c.callID, c.decisionID
	p.keyWrite(c, "released", func(ctx context.Context) error {
		return p.o.Keys.Release(ctx, tenant, callID, decisionID)
	})
}

// keyWrite runs op, which completes or releases c's key, and wakes the
// retries waiting for it on this replica. When the store fails, op is
// retried in the background (every 100 ms, backing off to 5 s) until it
// succeeds, the key is no longer this attempt's, its lease is over or the
// pipeline closes: a database that was away for a moment must not leave
// the key pending, with every retry waiting for the whole lease.
func (p *Pipeline) keyWrite(c *call, what string, op func(context.Context) error) {
	tenant, callID, decisionID, until := c.req.Identity.Tenant, c.callID, c.decisionID, c.keyLease
	c.keyLease = time.Time{}
	wake := func() { p.keyWaits.notify(callKey(tenant, callID)) }
	err := op(p.life)
	if err == nil || errors.Is(err, idempotency.ErrNotHeld) {
		wake()
		return
	}
	p.o.Logger.Error("idempotency key not "+what+"; retrying", "tenant", tenant, "call_id", callID,
		"decision_id", decisionID, "err", err)
	p.retryMu.Lock()
	if p.closed {
		p.retryMu.Unlock()
		wake()
		return
	}
	p.retries.Add(1)
	p.retryMu.Unlock()
	go func() {
		defer p.retries.Done()
		defer wake()
		delay := 100 * time.Millisecond
		for {
			t := time.NewTimer(delay)
			select {
			case <-p.life.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if !p.o.Now().Before(until) {
				p.o.Metrics.Idempotency.WithLabelValues("unsettled").Inc()
				p.o.Logger.Error("idempotency key not "+what+" before its lease ended: its retries answer unfinished",
					"tenant", tenant, "call_id", callID, "decision_id", decisionID)
				return
			}
			err := op(p.life)
			if err == nil || errors.Is(err, idempotency.ErrNotHeld) {
				p.o.Logger.Info("idempotency key "+what+" after the store recovered", "tenant", tenant,
					"call_id", callID, "decision_id", decisionID)
				return
			}
			delay = min(2*delay, 5*time.Second)
		}
	}()
}

// Close stops the pipeline's background work (writes of idempotency keys
// retried after a store failure) and waits for it to end. The gateway
// calls it before it closes the stores, which the retries use.
func (p *Pipeline) Close() {
	p.retryMu.Lock()
	p.closed = true
	p.retryMu.Unlock()
	p.stop()
	p.retries.Wait()
}
