package backend

import (
	"context"
	"errors"
	"log/slog"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/service"
	"github.com/toolgate/toolgate/internal/tlog"
)

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

// AuditLog is what the Audit service reads of the audit log
// (*audit.Log).
type AuditLog interface {
	Query(ctx context.Context, tenant string, f audit.Filter) (audit.Page, error)
	Get(ctx context.Context, tenant, id string) (*audit.Event, error)
	Verify(ctx context.Context, tenant string) (audit.VerifyResult, error)
}

var _ AuditLog = (*audit.Log)(nil)

// AuditOptions wire the Audit service.
type AuditOptions struct {
	Log AuditLog
	// Prover serves checkpoints and proofs; nil answers them with
	// KindUnavailable.
	Prover Prover
	Logger *slog.Logger
}

// NewAudit is the Audit service, checked (service.CheckedAudit).
func NewAudit(o AuditOptions) service.Audit {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return service.CheckedAudit(auditQueries{o})
}

type auditQueries struct{ o AuditOptions }

func (s auditQueries) unavailable(what string, err error) *service.Error {
	s.o.Logger.Error("audit "+what+" failed", "err", err)
	return errAuditUnavailable(err)
}

func (s auditQueries) Events(ctx context.Context, id *identity.Identity, f service.AuditFilter) (apiv1.AuditEventPage, error) {
	page, err := s.o.Log.Query(ctx, id.Tenant, auditFilter(f))
	if err != nil {
		if errors.Is(err, audit.ErrBadCursor) || errors.Is(err, audit.ErrBadFilter) {
			return apiv1.AuditEventPage{}, &service.Error{Kind: service.KindInvalid, Err: err,
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
		return nil, &service.Error{Kind: service.KindNotFound, Message: "no such event", Err: err}
	case err != nil:
		return nil, s.unavailable("get", err)
	}
	return ev, nil
}

func (s auditQueries) Verify(ctx context.Context, id *identity.Identity) (service.VerifyResult, error) {
	res, err := s.o.Log.Verify(ctx, id.Tenant)
	if err != nil {
		return res, s.unavailable("verify", err)
	}
	return res, nil
}

func (s auditQueries) Export(ctx context.Context, id *identity.Identity, req service.ExportRequest, emit func([]any) error) error {
	f := audit.Filter{From: req.From, To: req.To}
	switch req.Format {
	case apiv1.ExportNDJSON:
	case apiv1.ExportOPA:
		// OPA logs one event per decision: result events stay out.
		f.Phase = audit.PhaseDecision
	default:
		return service.Errorf(service.KindInvalid, `format must be "ndjson" or "opa"`)
	}
	emitted := false
	var emitErr error
	err := audit.Export(ctx, s.o.Log, id.Tenant, f, func(events []*audit.Event) error {
		emitted = true
		out := make([]any, 0, len(events))
		for _, ev := range events {
			switch {
			case req.Format != apiv1.ExportOPA:
				out = append(out, ev)
			case audit.ExportsToOPA(ev):
				out = append(out, audit.ToOPAEvent(ev))
			}
		}
		if len(out) == 0 {
			return nil
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
		return &service.Error{Kind: service.KindInvalid, Message: "from must not be after to", Err: err}
	}
	return errAuditUnavailable(err)
}

func (s auditQueries) prover() (Prover, error) {
	if s.o.Prover == nil {
		return nil, &service.Error{Kind: service.KindUnavailable, Message: "audit log is unavailable"}
	}
	return s.o.Prover, nil
}

// proofError maps a Prover failure.
func (s auditQueries) proofError(what string, err error) *service.Error {
	switch {
	case errors.Is(err, ErrProofNotFound):
		return &service.Error{Kind: service.KindNotFound, Message: "no such event in the log", Err: err}
	case errors.Is(err, ErrProofRange):
		return &service.Error{Kind: service.KindInvalid, Message: "size out of range of the log", Err: err}
	case errors.Is(err, ErrBadCheckpoint):
		return &service.Error{Kind: service.KindInvalid, Message: err.Error(), Err: err}
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
		return nil, &service.Error{Kind: service.KindUnavailable, Message: "no signed checkpoint yet; retry in a second", RetryAfter: time.Second, Err: err}
	}
	if err != nil {
		return nil, s.proofError("checkpoint", err)
	}
	return note, nil
}

func (s auditQueries) VerifierKey(context.Context, *identity.Identity) (string, error) {
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
		return apiv1.ConsistencyProof{}, service.Errorf(service.KindInvalid, "from must not exceed to")
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

// auditFilter is f as the audit log takes it.
func auditFilter(f service.AuditFilter) audit.Filter {
	return audit.Filter{
		Tool: f.Tool, Principal: f.Principal, Outcome: f.Outcome, Phase: f.Phase, SessionID: f.SessionID,
		CallID: f.CallID, DecisionID: f.DecisionID, From: f.From, To: f.To, Limit: f.Limit, Cursor: f.Cursor,
	}
}
