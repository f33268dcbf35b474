// Package audit is the append-only, hash-chained decision log. A Log sits in
// front of a Store: it assigns chain positions and hashes, batches
// concurrent appends into one transaction (group commit), and applies
// backpressure instead of dropping events. Stores (SQLite, PostgreSQL, in
// internal/store) only persist and query.
package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"
)

// Phases of an event.
const (
	PhaseDecision = "decision" // written before any effect
	PhaseResult   = "result"   // written after the tool ran
	// PhaseApproval records a human's step on a held call (approved,
	// denied) or its expiry.
	PhaseApproval = "approval"
	// PhaseQuestion records a step on an ask-user question: its answer
	// (answered) or its expiry (expired).
	PhaseQuestion = "question"
)

// Event is one audit record. Its JSON form is the contract's event shape.
type Event struct {
	ID             string           `json:"id"`
	Time           string           `json:"time"` // RFC 3339, UTC, millisecond precision
	Tenant         string           `json:"tenant"`
	Principal      string           `json:"principal"`
	Client         string           `json:"client,omitempty"`
	CallID         string           `json:"call_id"`
	DecisionID     string           `json:"decision_id"`
	SessionID      string           `json:"session_id"`
	Tool           string           `json:"tool"`
	Action         string           `json:"action"`
	Phase          string           `json:"phase"`
	Outcome        string           `json:"outcome"`
	Reasons        []string         `json:"reasons"`
	PolicyRevision string           `json:"policy_revision"`
	RequestDigest  string           `json:"request_digest"`
	Input          map[string]any   `json:"input"` // masked request document
	Obligations    map[string]any   `json:"obligations,omitempty"`
	Result         *ResultInfo      `json:"result,omitempty"`
	DurationsUS    map[string]int64 `json:"durations_us"`
	// Approval links the events of a call held for a human.
	Approval *ApprovalInfo `json:"approval,omitempty"`
	// Question links the events of an ask-user call and its answer.
	Question *QuestionInfo `json:"question,omitempty"`
	// Shadow is what the shadow policy would have decided.
	Shadow   *ShadowInfo `json:"shadow,omitempty"`
	Chain    string      `json:"chain"` // chain segment (one per writer/replica)
	Seq      int64       `json:"seq"`   // position in (tenant, chain), from 1
	PrevHash string      `json:"prev_hash"`
	Hash     string      `json:"hash"`
}

// ResultInfo summarizes what a tool returned. Error is an internal
// diagnostic for auditors; it never reaches a model-facing response.
type ResultInfo struct {
	IsError   bool   `json:"is_error"`
	Bytes     int    `json:"bytes"`
	Truncated bool   `json:"truncated"`
	Error     string `json:"error,omitempty"`
}

// ApprovalInfo ties an event to a held call: its approval id, when it
// expires (on the event that held it), and who approved or denied it.
type ApprovalInfo struct {
	ID        string `json:"id"`
	ExpiresAt string `json:"expires_at,omitempty"`
	By        string `json:"by,omitempty"`
	Comment   string `json:"comment,omitempty"`
}

// QuestionInfo ties an event to an ask-user question: its id, when it
// expires (on the event that asked it), and who answered it. The answer's
// text is not logged, only its size (result.bytes).
type QuestionInfo struct {
	ID        string `json:"id"`
	ExpiresAt string `json:"expires_at,omitempty"`
	By        string `json:"by,omitempty"`
}

// ShadowInfo is the shadow policy's verdict on the same request document.
// It never changes the outcome.
type ShadowInfo struct {
	Revision string `json:"revision"`
	// Outcome is allow, denied or approval_required, or error when the
	// shadow policy failed to evaluate.
	Outcome  string `json:"outcome"`
	Diverged bool   `json:"diverged"`
}

// TimeFormat is the event time layout.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// FormatTime renders t as an event time.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// Filter selects events of one tenant. Zero fields do not filter.
type Filter struct {
	Tool       string
	Principal  string
	Outcome    string
	Phase      string
	SessionID  string
	CallID     string
	DecisionID string
	From, To   time.Time // inclusive bounds on Time
	Limit      int       // 1..1000, default 100
	Cursor     string    // opaque, from Page.NextCursor
}

// Page is one page of events, newest first.
type Page struct {
	Events     []*Event
	NextCursor string // empty on the last page
}

// VerifyResult is the outcome of recomputing a tenant's chains.
type VerifyResult struct {
	OK            bool   `json:"ok"`
	EventsChecked int    `json:"events_checked"`
	FirstBadEvent string `json:"first_bad_event,omitempty"`
}

// Errors callers inspect with errors.Is.
var (
	ErrNotFound    = errors.New("audit: event not found")
	ErrOverloaded  = errors.New("audit: queue full")
	ErrUnavailable = errors.New("audit: store unavailable")
	ErrClosed      = errors.New("audit: log closed")
	ErrBadCursor   = errors.New("audit: invalid cursor")
	// ErrBadFilter: a Filter the API should answer with 400 (limit out of
	// 0..1000, From after To).
	ErrBadFilter = errors.New("audit: invalid filter")
	// ErrInvalidEvent: Append refused an event it cannot chain (no tenant,
	// unparsable time, a value that has no JSON form).
	ErrInvalidEvent = errors.New("audit: invalid event")
	// ErrCommitsFailing: Ping found the store reachable, but its last
	// commit failed and a probe write failed too (a full disk, a read-only
	// file or database). It wraps ErrUnavailable.
	ErrCommitsFailing = fmt.Errorf("%w: commits failing", ErrUnavailable)
)

// Head is the last link of one (tenant, chain).
type Head struct {
	Seq  int64
	Hash string
}

// Row is one stored event as Scan returns it: the raw JSON that was hashed
// and the indexed columns a store keeps beside it for queries. Verify checks
// every column against the raw JSON, so tampering with either is detected.
// Raw is only valid during the Scan callback.
type Row struct {
	Raw        []byte
	Tenant     string
	Chain      string
	Seq        int64
	ID         string
	TimeMS     int64 // the event time in Unix milliseconds
	Tool       string
	Principal  string
	Outcome    string
	Phase      string
	SessionID  string
	CallID     string
	DecisionID string
	Hash       string
}

// Entry is one chained event as the Log hands it to Store.Insert.
type Entry struct {
	// Event has its chain fields (ID, Chain, Seq, PrevHash, Hash) set.
	// Insert reads its scalar fields for the indexed columns only, and must
	// not retain or modify it.
	Event *Event
	// Raw is the exact JSON that was hashed: stored verbatim, returned by
	// Scan.
	Raw []byte
	// Record, when set, is a row of another repository that the event
	// announces and that must not exist without it, nor it without the
	// row: the approval of a held call (*approval.Approval) on its
	// decision event, the question of an ask-user call
	// (*approval.Question) on its result event. Insert writes it in the
	// same transaction as the batch. A store that cannot write it fails
	// the batch with a *RecordError.
	Record any
}

// RecordError is Insert failing because of the Record of one entry (a
// record the store does not keep, or its row refused). The transaction was
// rolled back before it committed, so nothing of the batch landed: the Log
// fails that entry alone and commits the others again.
type RecordError struct {
	Index int // into the entries given to Insert
	Err   error
}

func (e *RecordError) Error() string {
	return fmt.Sprintf("audit: record of entry %d: %v", e.Index, e.Err)
}

func (e *RecordError) Unwrap() error { return e.Err }

// Store persists events. Implementations live in internal/store (SQLite,
// the embedded default, and PostgreSQL). Every method is scoped by tenant;
// another tenant's events are indistinguishable from missing ones. All
// stores pass storetest. The store's opener owns its connections: a Store
// has no Close.
type Store interface {
	// Insert commits the entries in one transaction, their records
	// included: all or none, durable on return.
	Insert(ctx context.Context, entries []Entry) error
	// Heads returns the last link of every tenant's segment of chain.
	Heads(ctx context.Context, chain string) (map[string]Head, error)
	// Query returns events matching f, newest first, with cursor paging.
	Query(ctx context.Context, tenant string, f Filter) (Page, error)
	// Get returns one event or ErrNotFound.
	Get(ctx context.Context, tenant, id string) (*Event, error)
	// Scan calls fn for each stored row of tenant, ordered by the chain and
	// seq columns ascending, with the raw JSON as stored and the indexed
	// columns beside it, so that Verify can check that both agree. It stops
	// and returns fn's error when fn fails.
	Scan(ctx context.Context, tenant string, fn func(Row) error) error
	// Prune deletes, in every (tenant, chain), the longest prefix of events
	// older than cutoff, always keeping the chain's last event, and records
	// a Checkpoint at the cut in the same transaction. It refuses (and
	// reports with ErrBrokenChain, going on with the other chains) a chain
	// whose prefix has a gap or does not follow its checkpoint, so pruning
	// never hides a deletion.
	Prune(ctx context.Context, cutoff time.Time) (PruneResult, error)
	// Checkpoints returns the tenant's checkpoints by chain (empty when
	// nothing was pruned).
	Checkpoints(ctx context.Context, tenant string) (map[string]Checkpoint, error)
	// Ping reports whether the store can be reached (it reads).
	Ping(ctx context.Context) error
	// Probe commits a write that adds no event, through the same
	// connection and with the same durability as Insert: whether a batch
	// could commit now. The Log probes while its commits are failing, so
	// that readiness recovers without traffic.
	Probe(ctx context.Context) error
}

// DecodeEvent decodes a stored event (its raw JSON).
func DecodeEvent(raw []byte) (*Event, error) {
	ev := new(Event)
	if err := json.Unmarshal(raw, ev); err != nil {
		return nil, fmt.Errorf("audit: stored event: %w", err)
	}
	return ev, nil
}
