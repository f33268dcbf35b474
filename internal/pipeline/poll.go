package pipeline

import (
	"context"
	"errors"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/approval"
	"github.com/toolgate/toolgate/internal/identity"
)

// MaxPollWait bounds how long PollCall waits.
const MaxPollWait = 60 * time.Second

// ErrCallNotFound: the caller has no held call and no open or answered
// question under this call id.
var ErrCallNotFound = errors.New("call not found")

// CallState is what a caller polling a call that waits learns: a held
// call (Approval) or an ask-user question (Question), exactly one set.
type CallState struct {
	Approval *approval.Approval
	Question *approval.Question
}

// Pending reports whether the call still waits for a human.
func (s CallState) Pending() bool {
	if s.Approval != nil {
		return CallOutcome(s.Approval) == apiv1.OutcomePending
	}
	return s.Question != nil && s.Question.Status == approval.QuestionPending
}

func (s CallState) expiresAt() time.Time {
	if s.Approval != nil {
		return s.Approval.ExpiresAt
	}
	return s.Question.ExpiresAt
}

// PollCall returns the state of the caller's own held call or question.
// With wait > 0 (at most MaxPollWait) it waits while the call is pending:
// it returns as soon as the call changes on this replica (answered,
// approved and finished, denied), when it expires, when wait is over, or
// when the gateway shuts down. Changes made through another replica are
// seen within PollRecheck. An expired question reads as ErrCallNotFound;
// a caller that goes away gets the last state read. A tenant has at most
// Options.MaxTenantPolls polls waiting at once in this process: beyond
// that, a poll with wait > 0 is refused with a *LimitError before it
// reads anything (a poll without wait never waits and is not counted).
func (p *Pipeline) PollCall(ctx context.Context, id *identity.Identity, callID string, wait time.Duration) (CallState, error) {
	wait = min(wait, MaxPollWait)
	if wait > 0 {
		release, ok := p.polls.acquire(id.Tenant)
		if !ok {
			p.o.Metrics.RateLimited.WithLabelValues(LimitLongPolls).Inc()
			return CallState{}, &LimitError{Limit: LimitLongPolls, RetryAfter: time.Second}
		}
		defer release()
	}
	deadline := time.Now().Add(wait)
	for {
		ch, release, stopping := p.calls.subscribe(callKey(id.Tenant, callID))
		st, err := p.callState(ctx, id, callID)
		left := time.Until(deadline)
		if err != nil || !st.Pending() || left <= 0 || stopping {
			release()
			return st, err
		}
		// Wake at expiry too: the next read expires the call (and audits
		// it) whether or not the sweep got there first.
		if until := st.expiresAt().Sub(p.o.Now()); until > 0 && until+time.Millisecond < left {
			left = until + time.Millisecond
		}
		left = min(left, p.o.PollRecheck)
		t := time.NewTimer(left)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			// The caller went away: what it would have read is the last
			// state, not an error to log.
			t.Stop()
			release()
			return st, nil
		}
		t.Stop()
		release()
	}
}

// callState reads the caller's held call or, failing that, question.
func (p *Pipeline) callState(ctx context.Context, id *identity.Identity, callID string) (CallState, error) {
	a, err := p.CallApproval(ctx, id, callID)
	if err == nil {
		return CallState{Approval: a}, nil
	}
	if !errors.Is(err, ErrApprovalNotFound) {
		return CallState{}, err
	}
	q, err := p.CallQuestion(ctx, id, callID)
	if errors.Is(err, ErrQuestionNotFound) {
		return CallState{}, ErrCallNotFound
	}
	if err != nil {
		return CallState{}, err
	}
	return CallState{Question: q}, nil
}

// StopWaiting wakes every long-polling caller and makes later polls
// answer at once: the gateway calls it when it starts shutting down, so
// that polls do not hold the graceful shutdown.
func (p *Pipeline) StopWaiting() { p.calls.close() }
