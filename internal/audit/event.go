// Package audit is the append-only decision log, provable as a Merkle tree
// per tenant. A Log sits in front of a Store: it hashes events, batches
// concurrent appends into one transaction (group commit) into the store's
// narrow append table, and applies backpressure instead of dropping events.
// Behind the hot path one integrator per tenant moves committed events in
// large batches into the queryable events table, assigns each its
// log_index, integrates their hashes into the tenant's RFC 6962 tree
// (internal/tlog) and publishes signed checkpoints. Stores (SQLite,
// PostgreSQL, in internal/store) only persist and query.
package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/tlog"
)

// Phases of an event.
const (
	PhaseDecision = apiv1.PhaseDecision // written before any effect
	PhaseResult   = apiv1.PhaseResult   // written after the tool ran
	// PhaseApproval records a human's step on a held call (approved,
	// denied) or its expiry.
	PhaseApproval = apiv1.PhaseApproval
	// PhaseQuestion records a step on an ask-user question: its answer
	// (answered) or its expiry (expired).
	PhaseQuestion = apiv1.PhaseQuestion
	// PhaseDefinition records an MCP tool definition withheld from every
	// caller (drifted from its pin, unpinned, removed, invalid).
	PhaseDefinition = apiv1.PhaseDefinition
)

// Event is one audit record. It is the API's wire type (api/v1), so that
// what the gateway hashes, what it answers and what the SDK decodes are one
// type: a new member is one field of apiv1.AuditEvent (and one line of
// canonicalEventInto, which TestCanonicalEventCoversEveryField enforces).
type Event = apiv1.AuditEvent

// ResultInfo, ApprovalInfo, QuestionInfo and ShadowInfo are an event's
// optional parts (api/v1).
type (
	ResultInfo   = apiv1.AuditResult
	ApprovalInfo = apiv1.AuditApproval
	QuestionInfo = apiv1.AuditQuestion
	ShadowInfo   = apiv1.AuditShadow
)

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

// VerifyResult is the outcome of verifying a tenant's log (Verify,
// VerifyCheckpoint), the API's wire type.
type VerifyResult = apiv1.VerifyResult

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
	// ErrNotIntegrated: the event is committed but not yet in its
	// tenant's tree (it has no log_index; retry within a second). It
	// wraps ErrNotFound for callers that only know that one.
	ErrNotIntegrated = fmt.Errorf("%w: not yet integrated into the tree", ErrNotFound)
	// ErrNoCheckpoint: the tenant's tree has events but no signed
	// checkpoint yet (retry within a second; if it persists, the log
	// says why the key refuses to sign). It wraps ErrNotIntegrated.
	ErrNoCheckpoint = fmt.Errorf("%w: no signed checkpoint yet", ErrNotIntegrated)
	// ErrBadCheckpoint: a checkpoint note given to VerifyCheckpoint does
	// not open: malformed, not signed by this gateway's keys (current or
	// previous), or of another tenant's log. It wraps the tlog error.
	ErrBadCheckpoint = errors.New("audit: checkpoint does not verify")
	// ErrProofRange: a proof was asked for sizes the tree does not have
	// (a size above the tree's, from above to, an event not below size).
	ErrProofRange = errors.New("audit: proof range out of bounds")
)

// Row is one integrated event as Scan returns it: the raw JSON that was
// hashed, the indexed columns a store keeps beside it for queries, and the
// tree's stored leaf for its log index. Verify checks every column against
// the raw JSON and the leaf against the hash, so tampering with either is
// detected. Raw and Leaf are only valid during the Scan callback.
type Row struct {
	Raw        []byte
	LogIndex   int64
	Leaf       []byte // the level-0 tree node at LogIndex; nil when missing
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

// Entry is one hashed event as the Log hands it to Store.Insert.
type Entry struct {
	// Event has its ID, Time and Hash set (Chain "", Seq 0, PrevHash "").
	// Insert reads its scalar fields for the append table's columns only,
	// and must not retain or modify it.
	Event *Event
	// Raw is the exact canonical JSON that was hashed, "hash" included:
	// stored verbatim, returned by Get and Scan.
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
//
// A store keeps events in two places: a narrow append table that Insert
// writes on the hot path (one key, in commit order), and the queryable
// events table with its indexes, which only Integrate writes. Get and
// queries by call_id or decision_id read both, in one snapshot, so that
// an event is found there from its commit on; other queries read the
// events table only.
type Store interface {
	// Insert commits the entries into the append table in one
	// transaction, their records included: all or none, durable on
	// return.
	Insert(ctx context.Context, entries []Entry) error
	// Query returns events matching f, newest first, with cursor paging.
	// Events still in the append table are included when f names a
	// CallID or DecisionID.
	Query(ctx context.Context, tenant string, f Filter) (Page, error)
	// Get returns one event (LogIndex set once integrated) or ErrNotFound.
	Get(ctx context.Context, tenant, id string) (*Event, error)
	// Tree returns the tenant's tree as last integrated (the zero
	// TreeHead for a tenant with none).
	Tree(ctx context.Context, tenant string) (TreeHead, error)
	// Scan calls fn for each integrated event of tenant with from <=
	// log_index < to, in log_index order, with the raw JSON as stored, the
	// indexed columns and the stored leaf beside it, so that Verify can
	// check that all agree. It stops and returns fn's error when fn fails.
	Scan(ctx context.Context, tenant string, from, to int64, fn func(Row) error) error
	// Nodes reads stored nodes of the tenant's tree (tlog.NodeReader).
	Nodes(ctx context.Context, tenant string, ids []tlog.NodeID) ([][]byte, error)
	// IntegrationWork lists the tenants that have committed events not
	// yet integrated (in the append table, or events of the hash-chain
	// era without a log_index), or a tree grown past its latest
	// checkpoint.
	IntegrationWork(ctx context.Context) ([]string, error)
	// Integrate runs fn in one transaction that owns the tenant's tree:
	// no other integrator (in this process or, on PostgreSQL, in any
	// replica) changes it meanwhile. With wait false it returns (false,
	// nil) at once when another one holds it. The transaction commits
	// when fn returns nil and rolls back otherwise.
	Integrate(ctx context.Context, tenant string, wait bool, fn func(context.Context, TreeTx) error) (bool, error)
	// LegacyCheckpoints returns the tenant's retention checkpoints of the
	// hash-chain era by chain (empty when nothing was pruned then).
	LegacyCheckpoints(ctx context.Context, tenant string) (map[string]Checkpoint, error)
	// Tenants lists the tenants that have a tree (for retention).
	Tenants(ctx context.Context) ([]string, error)
	// Ping reports whether the store can be reached (it reads).
	Ping(ctx context.Context) error
	// Probe commits a write that adds no event, through the same
	// connection and with the same durability as Insert: whether a batch
	// could commit now. The Log probes while its commits are failing, so
	// that readiness recovers without traffic.
	Probe(ctx context.Context) error
}

// TreeHead is a tenant's tree as stored: its size and compact state (the
// next log index is Size), its root, how much retention cut off its front,
// and the latest signed checkpoint.
type TreeHead struct {
	Size  int64
	State []byte // tlog.State.MarshalBinary; nil for an empty tree
	Root  []byte
	// Pruned: the events below this log index were deleted by retention
	// (the tree keeps their nodes). PrunedBeforeMS is that prune's cutoff.
	Pruned         int64
	PrunedBeforeMS int64
	// Checkpoint is the latest signed checkpoint note (nil: none yet), of
	// the tree of CheckpointSize events, signed at CheckpointMS.
	Checkpoint     []byte
	CheckpointSize int64
	CheckpointMS   int64
}

// PendingRow is a committed event not yet integrated, as TreeTx.Pending
// returns it. Raw (the canonical event, its hash inside) is valid until
// the transaction ends.
type PendingRow struct {
	Seq int64 // the append table's key: commit order
	ID  string
	Raw []byte
}

// LegacyRow is an event of the hash-chain era that has no log index yet.
type LegacyRow struct {
	ID   string
	Hash string
}

// IntegratedEvent moves one pending row (Seq) into the events table at
// LogIndex, with the indexed columns and the hash decoded from its raw
// JSON.
type IntegratedEvent struct {
	Seq                                                            int64
	LogIndex                                                       int64
	ID                                                             string
	Hash                                                           string
	TimeMS                                                         int64
	Tool, Principal, Outcome, Phase, SessionID, CallID, DecisionID string
}

// LegacyIndex gives a hash-chain-era event (by id) its log index.
type LegacyIndex struct {
	ID       string
	LogIndex int64
}

// TreeAppend is one integrated batch as TreeTx.Append writes it: the
// events, the tree nodes that became complete, and the new tree.
type TreeAppend struct {
	From   int64 // the tree size the batch starts at
	Events []IntegratedEvent
	Legacy []LegacyIndex
	Nodes  []tlog.Node
	Size   int64 // From + len(Events) + len(Legacy)
	State  []byte
	Root   []byte
}

// TreeTx is one transaction of Store.Integrate, owning one tenant's tree.
type TreeTx interface {
	// Tree reads the tree.
	Tree(ctx context.Context) (TreeHead, error)
	// Legacy returns up to max hash-chain-era events without a log index,
	// in (chain, seq) order.
	Legacy(ctx context.Context, max int) ([]LegacyRow, error)
	// Pending returns up to max committed events of the tenant not yet
	// integrated, in commit order.
	Pending(ctx context.Context, max int) ([]PendingRow, error)
	// Append integrates a batch: inserts the events into the events table
	// and deletes them from the append table, sets the legacy events' log
	// indexes, inserts the nodes (never updating one) and stores the new
	// tree. It fails when the tree is no longer of size a.From.
	Append(ctx context.Context, a TreeAppend) error
	// Nodes reads nodes, those Append wrote in this transaction included.
	Nodes(ctx context.Context, ids []tlog.NodeID) ([][]byte, error)
	// PutCheckpoint stores a signed checkpoint of the tree of size
	// events as the latest.
	PutCheckpoint(ctx context.Context, note []byte, size, ms int64) error
	// Ages returns the event times (Unix ms) of up to max events from log
	// index from on, in log index order, with their log indexes.
	Ages(ctx context.Context, from int64, max int) (indexes, timesMS []int64, err error)
	// Prune deletes the events with from <= log_index < to and records
	// that the tree's events below to were pruned at cutoffMS. It returns
	// the events deleted.
	Prune(ctx context.Context, from, to, cutoffMS int64) (int64, error)
}

// DecodeEvent decodes a stored event (its raw JSON).
func DecodeEvent(raw []byte) (*Event, error) {
	ev := new(Event)
	if err := json.Unmarshal(raw, ev); err != nil {
		return nil, fmt.Errorf("audit: stored event: %w", err)
	}
	return ev, nil
}
