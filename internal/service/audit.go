package service

import (
	"context"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/identity"
)

// AuditFilter selects audit events (every field optional; Limit 1 to
// AuditMaxLimit, AuditDefaultLimit when 0).
type AuditFilter struct {
	Tool       string
	Principal  string
	Outcome    string
	Phase      string
	SessionID  string
	CallID     string
	DecisionID string
	From, To   time.Time // inclusive bounds on the event's time
	Limit      int
	Cursor     string // opaque, from a page's next_cursor
}

// AuditOutcomes are the outcomes an audit event can carry, the values the
// outcome filter takes (the MCP definition events' drifted, unpinned,
// removed and invalid included).
var AuditOutcomes = []string{
	string(apiv1.OutcomeAllow), string(apiv1.OutcomeDenied), string(apiv1.OutcomeUnavailable),
	string(apiv1.OutcomeInvalidArguments), string(apiv1.OutcomeApprovalRequired), string(apiv1.OutcomeRateLimited),
	string(apiv1.OutcomeError), string(apiv1.OutcomeOK), string(apiv1.OutcomeToolError),
	string(apiv1.OutcomeAwaitingUser), string(apiv1.OutcomeCanceled), string(apiv1.OutcomeApproved),
	string(apiv1.OutcomeAnswered), string(apiv1.OutcomeExpired),
	"drifted", "unpinned", "removed", "invalid",
}

// AuditPhases are the phases of audit events, the values the phase filter
// takes.
var AuditPhases = []string{apiv1.PhaseDecision, apiv1.PhaseResult, apiv1.PhaseApproval, apiv1.PhaseQuestion, apiv1.PhaseDefinition}

// The page size of Audit.Events: the default and the most.
const (
	AuditDefaultLimit = 100
	AuditMaxLimit     = 1000
)

// VerifyResult is the answer of a chain verification.
type VerifyResult = apiv1.VerifyResult

// ExportRequest selects an export: the format (apiv1.ExportNDJSON or
// apiv1.ExportOPA) and an optional time range.
type ExportRequest struct {
	Format   string
	From, To time.Time
}

// Audit answers auditors' queries of their tenant's log: events, the
// hash chain, exports, and checkpoints and proofs. Every method needs the
// auditor role (KindForbidden before anything is read) and is scoped to
// id's tenant; another tenant's event looks like one that does not exist,
// and so does an event id that is not an id (ValidID).
type Audit interface {
	// Events is one page of events, newest first. KindInvalid: a limit
	// out of range, a cursor of other filters or tenant, or from after to.
	Events(ctx context.Context, id *identity.Identity, f AuditFilter) (apiv1.AuditEventPage, error)
	// Event is one event (KindNotFound).
	Event(ctx context.Context, id *identity.Identity, eventID string) (*apiv1.AuditEvent, error)
	// Verify recomputes the tenant's hash chain.
	Verify(ctx context.Context, id *identity.Identity) (VerifyResult, error)
	// Export calls emit with the events of the range, oldest first, batch
	// by batch (at most 1000 at a time), each as the value to encode on
	// its own line: the event, or its OPA decision-log form. An error
	// emit returns ends the export and is returned as is. KindInvalid: a
	// format that is neither, or from after to (before any emit).
	Export(ctx context.Context, id *identity.Identity, req ExportRequest, emit func([]any) error) error
	// Checkpoint is the tenant's latest signed checkpoint note.
	// KindUnavailable with RetryAfter: none signed yet.
	Checkpoint(ctx context.Context, id *identity.Identity) ([]byte, error)
	// VerifierKey is the checkpoints' note verifier key.
	VerifierKey(ctx context.Context, id *identity.Identity) (string, error)
	// InclusionProof proves an event at a tree size (KindNotFound,
	// KindInvalid for a size out of range).
	InclusionProof(ctx context.Context, id *identity.Identity, eventID string, size uint64) (apiv1.InclusionProof, error)
	// ConsistencyProof proves the tree of size to extends that of from.
	ConsistencyProof(ctx context.Context, id *identity.Identity, from, to uint64) (apiv1.ConsistencyProof, error)
	// VerifyCheckpoint checks the log against a checkpoint an auditor
	// saved (KindInvalid: it does not open with the keys).
	VerifyCheckpoint(ctx context.Context, id *identity.Identity, note []byte) (any, error)
	// ProveEvent checks that ev, exactly as given (an event of Event or
	// Events), is in the tenant's log as its latest signed checkpoint
	// commits to. Not being able to tell yet is a status, not an error;
	// KindNotFound: ev is not of id's tenant.
	ProveEvent(ctx context.Context, id *identity.Identity, ev *apiv1.AuditEvent) (EventProof, error)
}

// Statuses of an EventProof.
const (
	// ProofVerified: the event's content hashes to its hash, the latest
	// checkpoint opens with the gateway's verifier keys, and the event's
	// inclusion proof at the checkpoint's size verifies against its root.
	ProofVerified = "verified"
	// ProofPending: not provable yet, as is normal for a second or so
	// after an event is written: not integrated into the tree, or not
	// covered by a signed checkpoint yet.
	ProofPending = "pending"
	// ProofFailed: something that should verify does not — the event, the
	// checkpoint or the tree was changed. An alarm.
	ProofFailed = "failed"
	// ProofUnavailable: the check could not run (no prover, the store
	// failed); it says nothing about the log.
	ProofUnavailable = "unavailable"
)

// EventProof is whether an event is provably in its tenant's log.
type EventProof struct {
	Status string // ProofVerified, ProofPending, ProofFailed or ProofUnavailable
	// CheckpointSize is the tree size of the checkpoint the event was
	// checked against (0 when no checkpoint was opened).
	CheckpointSize uint64
	// Reason says why Status is not ProofVerified, in a sentence safe to
	// show an auditor.
	Reason string
}
