package audit

import (
	"context"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/internal/tlog"
)

// What an auditor gets from the log (the HTTP routes serve these):
//
//   - Checkpoint: the tenant's latest signed checkpoint note, to keep;
//   - VerifierKey: the key that checks its signature;
//   - InclusionProof: that an event is in the tree of a checkpoint;
//   - ConsistencyProof: that a later checkpoint extends an earlier one;
//   - VerifyCheckpoint: that the stored log still is what a kept
//     checkpoint committed to, and more.
//
// Any RFC 6962 / C2SP signed-note implementation checks the first four;
// tlog.VerifyInclusion and tlog.VerifyConsistency are one.

// Checkpoint returns the tenant's latest signed checkpoint note (C2SP
// tlog-checkpoint body, origin "toolgate/<tenant>", one Ed25519 signature
// line): the same bytes from every replica. Checkpoints are signed by the
// integrator and cover a committed event within about
// LogOptions.CheckpointInterval. A tenant with no event yet gets a
// checkpoint of the empty tree, signed now (Ed25519 is deterministic, so
// that too is the same from every replica). A tenant whose tree has
// events but no signed checkpoint (the first one is signed with the first
// integration; none is when the key does not match, see the log) gets
// ErrNoCheckpoint.
func (l *Log) Checkpoint(ctx context.Context, tenant string) ([]byte, error) {
	head, err := l.store.Tree(ctx, tenant)
	if err != nil {
		return nil, storeErr(err)
	}
	switch {
	case head.Checkpoint != nil:
		return head.Checkpoint, nil
	case head.Size > 0:
		return nil, ErrNoCheckpoint
	}
	return l.tree.signer.Sign(tlog.Checkpoint{Origin: tlog.Origin(tenant), Size: 0, Root: tlog.EmptyRoot()})
}

// VerifierKey returns the verifier key of the key that signs checkpoints,
// "toolgate-audit+<hash>+<base64 Ed25519 key>" as note.NewVerifier reads
// it.
func (l *Log) VerifierKey() string { return l.tree.signer.VerifierKey() }

// Verifier opens checkpoints signed by the current key or a previous one
// (after a rotation of audit.signing_key_file).
func (l *Log) Verifier() *tlog.Verifier { return l.tree.signer.Verifier() }

// InclusionProof proves that event id of the tenant is in the tenant's
// tree of size entries (the size of a checkpoint the auditor holds; 0
// means the latest checkpoint's). Verify it with the 32 bytes of the
// event's hash (HashBytes) as the leaf entry: tlog.VerifyInclusion, or any
// RFC 6962 implementation. Its JSON form is {"index","size","hashes"}.
//
// Errors: ErrNotFound (no such event of the tenant), ErrNotIntegrated
// (committed, not yet in the tree or, with size 0, not yet covered by a
// checkpoint: retry within a second), ErrProofRange (size larger than the
// tree, or not larger than the event's log index), ErrUnavailable.
func (l *Log) InclusionProof(ctx context.Context, tenant, id string, size int64) (tlog.InclusionProof, error) {
	ev, err := l.Get(ctx, tenant, id)
	if err != nil {
		return tlog.InclusionProof{}, err
	}
	if ev.LogIndex == nil {
		return tlog.InclusionProof{}, ErrNotIntegrated
	}
	head, err := l.store.Tree(ctx, tenant)
	if err != nil {
		return tlog.InclusionProof{}, storeErr(err)
	}
	index := *ev.LogIndex
	if size == 0 {
		if size = head.CheckpointSize; index >= size {
			return tlog.InclusionProof{}, ErrNotIntegrated
		}
	}
	if size < 0 || size > head.Size || index >= size {
		return tlog.InclusionProof{}, fmt.Errorf("%w: event at log_index %d, size %d, tree of %d", ErrProofRange, index, size, head.Size)
	}
	p, err := tlog.ProveInclusion(ctx, storeNodes{l.store, tenant}, uint64(index), uint64(size))
	return p, proofErr(err)
}

// ConsistencyProof proves that the tenant's tree of from entries is a
// prefix of its tree of to entries (to 0: the latest checkpoint's size).
// Verify it against the two checkpoints with tlog.VerifyConsistency or any
// RFC 6962 implementation. Its JSON form is {"from","to","hashes"}.
//
// Errors: ErrProofRange (from > to, to larger than the tree, negative
// sizes), ErrUnavailable.
func (l *Log) ConsistencyProof(ctx context.Context, tenant string, from, to int64) (tlog.ConsistencyProof, error) {
	head, err := l.store.Tree(ctx, tenant)
	if err != nil {
		return tlog.ConsistencyProof{}, storeErr(err)
	}
	if to == 0 {
		to = head.CheckpointSize
	}
	if from < 0 || from > to || to > head.Size {
		return tlog.ConsistencyProof{}, fmt.Errorf("%w: from %d, to %d, tree of %d", ErrProofRange, from, to, head.Size)
	}
	p, err := tlog.ProveConsistency(ctx, storeNodes{l.store, tenant}, uint64(from), uint64(to))
	return p, proofErr(err)
}

func proofErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, tlog.ErrBadRange):
		return fmt.Errorf("%w: %w", ErrProofRange, err)
	}
	return storeErr(err)
}
