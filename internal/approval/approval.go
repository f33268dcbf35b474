// Package approval keeps calls that policy held for a human
// (approval_required): the frozen request document they were decided on,
// its digest, and their way from pending to approved, denied or expired.
// The Store lives in the audit database (internal/store, SQLite or
// PostgreSQL) and passes one conformance suite (approvaltest); a held
// call's approval is written in the transaction of its decision event
// (audit.Log.AppendWith). Every transition is conditional, so a
// held call is approved at most once, whatever the number of approvers or
// replicas. The same stores keep the questions of ask-user calls
// (Question), which wait for a user's answer the way held calls wait for
// an approver.
package approval

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Statuses of a held call.
const (
	StatusPending  = "pending"  // waiting for a human
	StatusApproved = "approved" // an approver took it; it ran (or is running)
	StatusDenied   = "denied"   // an approver refused it
	StatusExpired  = "expired"  // nobody decided in time
)

// Approval is one held call.
type Approval struct {
	ID         string
	Tenant     string
	CallID     string
	DecisionID string // of the decision that held the call
	SessionID  string
	Principal  string // who asked
	Client     string
	Tool       string
	Action     string
	// Digest is the request document's digest: what runs after approval
	// must have exactly this digest.
	Digest         string
	PolicyRevision string
	// Document is the unmasked request document, digest included. It is
	// what an approval re-prepares and re-decides; it never leaves the
	// gateway (views show Input).
	Document map[string]any
	// Input is the document as the audit log shows it (masked).
	Input       map[string]any
	Reasons     []string
	Obligations map[string]any
	CreatedAt   time.Time
	ExpiresAt   time.Time

	Status    string
	DecidedBy string
	DecidedAt time.Time // zero while pending
	Comment   string
	// Outcome is the call's outcome once an approved call finished (ok or
	// tool_error); "" before.
	Outcome string
	Result  *Result
}

// Result is what the approved call returned, for the caller to poll.
type Result struct {
	Content string         `json:"content"`
	IsError bool           `json:"is_error"`
	Data    map[string]any `json:"data,omitempty"`
}

// Decision is an approver's step on a pending approval.
type Decision struct {
	Status  string // StatusApproved or StatusDenied
	By      string
	Comment string
	At      time.Time
}

// Filter selects approvals of one tenant, newest first.
type Filter struct {
	Status string // "" for all
	Limit  int    // 1..1000, default 100
}

// Errors callers inspect with errors.Is.
var (
	// ErrNotFound: no such approval in the tenant (another tenant's looks
	// the same).
	ErrNotFound = errors.New("approval: not found")
	// ErrNotPending: the approval was already approved, denied or expired.
	ErrNotPending = errors.New("approval: already decided")
	// ErrExpired: the approval is pending but its time is up.
	ErrExpired = errors.New("approval: expired")
	// ErrFinished: Finish on an approval that is not approved or already
	// has an outcome.
	ErrFinished = errors.New("approval: not running")
)

// Store persists approvals and ask-user questions (Questions). Every
// method is scoped by tenant. Its opener owns the connections: a Store has
// no Close.
type Store interface {
	Questions
	// Create stores a new pending approval.
	Create(ctx context.Context, a *Approval) error
	// Get returns one approval or ErrNotFound.
	Get(ctx context.Context, tenant, id string) (*Approval, error)
	// ByCall returns the newest approval of a call id or ErrNotFound.
	ByCall(ctx context.Context, tenant, callID string) (*Approval, error)
	// List returns approvals matching f, newest first.
	List(ctx context.Context, tenant string, f Filter) ([]*Approval, error)
	// Decide moves a pending approval whose expiry is after d.At to
	// d.Status, atomically: of concurrent deciders exactly one succeeds.
	// The others get ErrNotPending; a pending approval past its expiry
	// gives ErrExpired and stays pending (Expire moves it).
	Decide(ctx context.Context, tenant, id string, d Decision) (*Approval, error)
	// Expire moves the tenant's pending approvals whose expiry is at or
	// before now to expired and returns them (each exactly once).
	Expire(ctx context.Context, tenant string, now time.Time) ([]*Approval, error)
	// Finish records the outcome of an approved call, once.
	Finish(ctx context.Context, tenant, id, outcome string, r Result) error
	// Pending counts the tenant's held calls and questions that are
	// pending and whose expiry is after now (what approvals.max_pending
	// bounds).
	Pending(ctx context.Context, tenant string, now time.Time) (int, error)
}

// DefaultLimit and MaxLimit bound List.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// PageSize is f.Limit bounded to 1..MaxLimit, DefaultLimit when unset.
func (f Filter) PageSize() int {
	switch {
	case f.Limit <= 0:
		return DefaultLimit
	case f.Limit > MaxLimit:
		return MaxLimit
	}
	return f.Limit
}

// Validate checks what Decide may be asked to do: approve or deny.
func (d Decision) Validate() error {
	if d.Status != StatusApproved && d.Status != StatusDenied {
		return fmt.Errorf("approval: cannot decide to %q", d.Status)
	}
	return nil
}
