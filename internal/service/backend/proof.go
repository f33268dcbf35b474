package backend

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/service"
	"github.com/toolgate/toolgate/internal/tlog"
)

// ProveEvent checks ev against the latest checkpoint with the same
// functions an auditor's tools use (tlog.Verifier.Open,
// tlog.VerifyInclusion), so that a page can say "verified against
// checkpoint N" of exactly the event it shows.
func (s auditQueries) ProveEvent(ctx context.Context, id *identity.Identity, ev *apiv1.AuditEvent) (service.EventProof, error) {
	if ev == nil || ev.Tenant != id.Tenant {
		return service.EventProof{}, &service.Error{Kind: service.KindNotFound, Message: "no such event"}
	}
	var size uint64
	failed := func(format string, a ...any) (service.EventProof, error) {
		reason := fmt.Sprintf(format, a...)
		s.o.Logger.Error("audit event does not prove its place in the log", "tenant", id.Tenant, "event", ev.ID, "problem", reason)
		return service.EventProof{Status: service.ProofFailed, CheckpointSize: size, Reason: reason}, nil
	}
	unavailable := func(reason string, err error) (service.EventProof, error) {
		if err != nil {
			s.o.Logger.Error("audit event proof could not be checked", "tenant", id.Tenant, "event", ev.ID, "err", err)
		}
		return service.EventProof{Status: service.ProofUnavailable, CheckpointSize: size, Reason: reason}, nil
	}
	pending := func(format string, a ...any) (service.EventProof, error) {
		return service.EventProof{Status: service.ProofPending, CheckpointSize: size, Reason: fmt.Sprintf(format, a...)}, nil
	}

	// The content shown is the content proved: it must hash to the
	// event's hash, the tree's entry for it.
	h, err := ev.ComputeHash()
	if errors.Is(err, apiv1.ErrUnknownLeafVersion) {
		return failed("the event cannot be checked: %v (this console knows leaf versions %d to %d)", err, apiv1.LeafVersion1, apiv1.CurrentLeafVersion)
	}
	if err != nil || h != ev.Hash {
		return failed("the event's content does not hash to its recorded hash %s", ev.Hash)
	}
	entry, err := audit.HashBytes(ev.Hash)
	if err != nil {
		return failed("the event's hash %q is not a SHA-256 event hash", ev.Hash)
	}
	if ev.LogIndex == nil {
		return pending("not yet integrated into the tenant's tree (this normally happens within a second of the event); reload the page")
	}
	if *ev.LogIndex < 0 {
		return failed("the event has a negative log index %d", *ev.LogIndex)
	}
	index := uint64(*ev.LogIndex)
	p, err := s.prover()
	if err != nil {
		return unavailable("this gateway serves no checkpoints or proofs", nil)
	}
	note, err := p.Checkpoint(ctx, id.Tenant)
	switch {
	case errors.Is(err, ErrProofNotFound):
		return pending("integrated at log index %d, but no checkpoint is signed yet; reload the page in a second", index)
	case err != nil:
		return unavailable("the latest checkpoint could not be read; try again", err)
	}
	v, err := tlog.NewVerifier(p.VerifierKeys()...)
	if err != nil {
		return unavailable("the gateway's verifier keys could not be read", err)
	}
	cp, err := v.Open(note, tlog.Origin(id.Tenant))
	if err != nil {
		return failed("the latest checkpoint does not open with the gateway's verifier keys: %s", strings.TrimPrefix(err.Error(), "tlog: "))
	}
	size = cp.Size
	if index >= cp.Size {
		return pending("integrated at log index %d; the latest checkpoint (size %d) does not cover it yet — reload the page in a second", index, cp.Size)
	}
	proof, err := p.InclusionProof(ctx, id.Tenant, ev.ID, cp.Size)
	switch {
	case errors.Is(err, tlog.ErrNodeNotFound):
		return failed("a node of the tenant's tree that the proof needs is missing from the store")
	case errors.Is(err, ErrProofNotFound):
		return failed("the log has no inclusion proof for this event at checkpoint %d", cp.Size)
	case errors.Is(err, ErrProofRange):
		return failed("the stored tree is smaller than checkpoint %d says", cp.Size)
	case err != nil:
		return unavailable("the inclusion proof could not be read; try again", err)
	}
	if proof.Index != index {
		return failed("the inclusion proof is for log index %d, the event is at %d", proof.Index, index)
	}
	if err := tlog.VerifyInclusion(proof, entry, cp); err != nil {
		return failed("the inclusion proof does not verify against checkpoint %d: %s", cp.Size, strings.TrimPrefix(err.Error(), "tlog: "))
	}
	return service.EventProof{Status: service.ProofVerified, CheckpointSize: cp.Size}, nil
}
