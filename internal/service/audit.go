package service

import (
	"context"
	"errors"
	"log/slog"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/tlog"
)

// AuditFilter selects audit events (every field optional; Limit 1–1000).
type AuditFilter = audit.Filter

// VerifyResult is the answer of a chain or checkpoint verification.
type VerifyResult = audit.VerifyResult

// ExportRequest selects an export: the format (apiv1.ExportNDJSON or
// apiv1.ExportOPA) and an optional time range.
type ExportRequest struct {
	Format   string
	From, To time.Time
}

// Audit answers auditors' queries of their tenant's log: events, the
// hash chain, exports, and — with a Prover — checkpoints and proofs.
// Every method is scoped to id's tenant; another tenant's event looks like
// one that does not exist.
type Audit interface {
	// Events is one page of events, newest first. KindInvalid: a cursor
	// of other filters or tenant, or from after to.
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
	VerifierKey(ctx context.Context) (string, error)
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

// Prover serves a tenant's audit log as a transparency log: signed
// checkpoints, inclusion and consistency proofs, and the check of the
// current log against a checkpoint an auditor saved (docs/audit.md
// "Proving the log"). Its errors for the caller's mistakes are
// ErrProofNotFound, ErrProofRange and ErrBadCheckpoint.
type Prover interface {
	// Checkpoint is the tenant's latest checkpoint as a signed note.
	Checkpoint(ctx context.Context, tenant string) ([]byte, error)
	// VerifierKey is the note verifier key (name+hash+base64key).
	VerifierKey() string
	// VerifierKeys are the verifier keys of the current signing key and
	// of the previous ones it replaced, current first: what opens every
	// checkpoint the log signed.
	VerifierKeys() []string
	// InclusionProof proves the event id at tree size size.
	InclusionProof(ctx context.Context, tenant, id string, size uint64) (tlog.InclusionProof, error)
	// ConsistencyProof proves the tree of size to extends that of from.
	ConsistencyProof(ctx context.Context, tenant string, from, to uint64) (tlog.ConsistencyProof, error)
	// VerifyCheckpoint checks the current log against a saved checkpoint
	// note; its result is the JSON answer.
	VerifyCheckpoint(ctx context.Context, tenant string, note []byte) (any, error)
}

// Errors a Prover returns that are the caller's, not the server's.
var (
	// ErrProofNotFound: no such event in the tenant's tree (unknown, of
	// another tenant, or not integrated yet at that size).
	ErrProofNotFound = errors.New("not found")
	// ErrProofRange: a size beyond the current tree, or from > to.
	ErrProofRange = errors.New("size out of range")
	// ErrBadCheckpoint: the note does not open with the verifier keys or
	// names another log. Its message is safe to show.
	ErrBadCheckpoint = errors.New("bad checkpoint")
)

// AuditOptions wire the Audit service.
type AuditOptions struct {
	Log *audit.Log
	// Prover serves checkpoints and proofs; nil answers them with
	// KindUnavailable.
	Prover Prover
	Logger *slog.Logger
}

// NewAudit is the Audit service.
func NewAudit(o AuditOptions) Audit {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return auditQueries{o}
}

type auditQueries struct{ o AuditOptions }

func (s auditQueries) unavailable(what string, err error) *Error {
	s.o.Logger.Error("audit "+what+" failed", "err", err)
	return errAuditUnavailable(err)
}

func (s auditQueries) Events(ctx context.Context, id *identity.Identity, f AuditFilter) (apiv1.AuditEventPage, error) {
	page, err := s.o.Log.Query(ctx, id.Tenant, f)
	if err != nil {
		if errors.Is(err, audit.ErrBadCursor) || errors.Is(err, audit.ErrBadFilter) {
			return apiv1.AuditEventPage{}, &Error{Kind: KindInvalid, Err: err,
				Message: "cursor or filter is not valid (a cursor belongs to its tenant and filters; from must not be after to)"}
		}
		return apiv1.AuditEventPage{}, s.unavailable("query", err)
	}
	events := page.Events
	if events == nil {
		events = []*audit.Event{}
	}
	return apiv1.AuditEventPage{Events: events, NextCursor: page.NextCursor}, nil
}

func (s auditQueries) Event(ctx context.Context, id *identity.Identity, eventID string) (*apiv1.AuditEvent, error) {
	ev, err := s.o.Log.Get(ctx, id.Tenant, eventID)
	switch {
	case errors.Is(err, audit.ErrNotFound):
		return nil, &Error{Kind: KindNotFound, Message: "no such event", Err: err}
	case err != nil:
		return nil, s.unavailable("get", err)
	}
	return ev, nil
}

func (s auditQueries) Verify(ctx context.Context, id *identity.Identity) (VerifyResult, error) {
	res, err := s.o.Log.Verify(ctx, id.Tenant)
	if err != nil {
		return res, s.unavailable("verify", err)
	}
	return res, nil
}

func (s auditQueries) Export(ctx context.Context, id *identity.Identity, req ExportRequest, emit func([]any) error) error {
	f := audit.Filter{From: req.From, To: req.To}
	switch req.Format {
	case apiv1.ExportNDJSON:
	case apiv1.ExportOPA:
		// OPA logs one event per decision: result events stay out.
		f.Phase = audit.PhaseDecision
	default:
		return Errorf(KindInvalid, `format must be "ndjson" or "opa"`)
	}
	emitted := false
	var emitErr error
	err := audit.Export(ctx, s.o.Log, id.Tenant, f, func(events []*audit.Event) error {
		emitted = true
		out := make([]any, len(events))
		for i, ev := range events {
			out[i] = ev
			if req.Format == apiv1.ExportOPA {
				out[i] = audit.ToOPAEvent(ev)
			}
		}
		emitErr = emit(out)
		return emitErr
	})
	switch {
	case err == nil:
		return nil
	case emitErr != nil && errors.Is(err, emitErr):
		return err
	case !emitted && errors.Is(err, audit.ErrBadFilter):
		return &Error{Kind: KindInvalid, Message: "from must not be after to", Err: err}
	}
	return errAuditUnavailable(err)
}

func (s auditQueries) prover() (Prover, error) {
	if s.o.Prover == nil {
		return nil, &Error{Kind: KindUnavailable, Message: "audit log is unavailable"}
	}
	return s.o.Prover, nil
}

// proofError maps a Prover failure.
func (s auditQueries) proofError(what string, err error) *Error {
	switch {
	case errors.Is(err, ErrProofNotFound):
		return &Error{Kind: KindNotFound, Message: "no such event in the log", Err: err}
	case errors.Is(err, ErrProofRange):
		return &Error{Kind: KindInvalid, Message: "size out of range of the log", Err: err}
	case errors.Is(err, ErrBadCheckpoint):
		return &Error{Kind: KindInvalid, Message: err.Error(), Err: err}
	}
	return s.unavailable(what, err)
}

func (s auditQueries) Checkpoint(ctx context.Context, id *identity.Identity) ([]byte, error) {
	p, err := s.prover()
	if err != nil {
		return nil, err
	}
	note, err := p.Checkpoint(ctx, id.Tenant)
	if errors.Is(err, ErrProofNotFound) {
		// Events are in the tree but no checkpoint is signed yet (within
		// audit.checkpoint_interval of the first ones): transient.
		return nil, &Error{Kind: KindUnavailable, Message: "no signed checkpoint yet; retry in a second", RetryAfter: time.Second, Err: err}
	}
	if err != nil {
		return nil, s.proofError("checkpoint", err)
	}
	return note, nil
}

func (s auditQueries) VerifierKey(context.Context) (string, error) {
	p, err := s.prover()
	if err != nil {
		return "", err
	}
	return p.VerifierKey(), nil
}

func (s auditQueries) InclusionProof(ctx context.Context, id *identity.Identity, eventID string, size uint64) (apiv1.InclusionProof, error) {
	p, err := s.prover()
	if err != nil {
		return apiv1.InclusionProof{}, err
	}
	proof, err := p.InclusionProof(ctx, id.Tenant, eventID, size)
	if err != nil {
		return apiv1.InclusionProof{}, s.proofError("inclusion proof", err)
	}
	return apiv1.InclusionProof(proof), nil
}

func (s auditQueries) ConsistencyProof(ctx context.Context, id *identity.Identity, from, to uint64) (apiv1.ConsistencyProof, error) {
	p, err := s.prover()
	if err != nil {
		return apiv1.ConsistencyProof{}, err
	}
	if from > to {
		return apiv1.ConsistencyProof{}, Errorf(KindInvalid, "from must not exceed to")
	}
	proof, err := p.ConsistencyProof(ctx, id.Tenant, from, to)
	if err != nil {
		return apiv1.ConsistencyProof{}, s.proofError("consistency proof", err)
	}
	return apiv1.ConsistencyProof(proof), nil
}

func (s auditQueries) VerifyCheckpoint(ctx context.Context, id *identity.Identity, note []byte) (any, error) {
	p, err := s.prover()
	if err != nil {
		return nil, err
	}
	res, err := p.VerifyCheckpoint(ctx, id.Tenant, note)
	if err != nil {
		return nil, s.proofError("verify", err)
	}
	return res, nil
}
