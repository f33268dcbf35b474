package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Checkpoint records where retention cut a (tenant, chain): Seq and Hash
// are those of the last pruned event, so the first remaining event must
// have seq Seq+1 and prev_hash Hash. Verify starts the chain from it.
type Checkpoint struct {
	Tenant         string `json:"tenant"`
	Chain          string `json:"chain"`
	Seq            int64  `json:"seq"`
	Hash           string `json:"hash"`
	PrunedBeforeMS int64  `json:"pruned_before_ms"` // the cutoff, Unix milliseconds
	CreatedMS      int64  `json:"created_ms"`       // when the cut was made
	CheckpointHash string `json:"checkpoint_hash"`
}

// checkpointContent is a Checkpoint without its own hash.
type checkpointContent struct {
	Tenant         string `json:"tenant"`
	Chain          string `json:"chain"`
	Seq            int64  `json:"seq"`
	Hash           string `json:"hash"`
	PrunedBeforeMS int64  `json:"pruned_before_ms"`
	CreatedMS      int64  `json:"created_ms"`
}

// ComputeCheckpointHash is the hash a checkpoint must carry:
//
//	"sha256:" + hex(sha256(C))
//
// where C is the RFC 8785 canonical JSON of the checkpoint's members
// tenant, chain, seq, hash, pruned_before_ms and created_ms. Like the event
// chain it is unkeyed: it detects a checkpoint edited by hand, not one
// rewritten by someone who also recomputes this hash.
func ComputeCheckpointHash(c Checkpoint) string {
	b, err := json.Marshal(checkpointContent{
		Tenant: c.Tenant, Chain: c.Chain, Seq: c.Seq, Hash: c.Hash,
		PrunedBeforeMS: c.PrunedBeforeMS, CreatedMS: c.CreatedMS,
	})
	if err != nil { // strings and integers always marshal
		panic(err)
	}
	v := jsontext.Value(b)
	if err := v.Canonicalize(); err != nil {
		panic(err)
	}
	return hashOf(v)
}

// PruneResult counts what one Prune removed.
type PruneResult struct {
	Events int64 // events deleted
	Chains int   // (tenant, chain) segments cut
}

// ErrBrokenChain: Prune refused a chain whose prefix has a gap, does not
// follow its checkpoint, or whose checkpoint was edited; pruning it would
// erase the evidence. Verify reports the same chain as bad.
var ErrBrokenChain = errors.New("audit: chain broken; not pruned")

// PruneBatch bounds the events one prune transaction deletes, so that a
// first prune of a large store does not hold the write lock for long.
const PruneBatch = 10000

// PruneTx is one store transaction as PruneStep needs it, scoped to one
// (tenant, chain). Stores implement it over their transactions.
type PruneTx interface {
	// Checkpoint returns the chain's checkpoint, if any.
	Checkpoint(ctx context.Context) (Checkpoint, bool, error)
	// Bounds returns the lowest and highest stored seq (ok false: none).
	Bounds(ctx context.Context) (first, head int64, ok bool, err error)
	// FirstYoung returns the lowest seq with time_ms >= cutoffMS.
	FirstYoung(ctx context.Context, cutoffMS int64) (int64, bool, error)
	// HashAt returns the hash column of the event at seq.
	HashAt(ctx context.Context, seq int64) (string, error)
	// DeleteRange deletes first..end and returns the rows deleted.
	DeleteRange(ctx context.Context, first, end int64) (int64, error)
	// PutCheckpoint inserts or replaces the chain's checkpoint.
	PutCheckpoint(ctx context.Context, c Checkpoint) error
}

// PruneStep cuts at most max events off the front of one chain, keeping
// every event at or after cutoffMS in seq order and the last event, and
// moves the checkpoint to the cut. The caller commits when it succeeds
// and rolls back otherwise. more reports that events older than the cutoff
// remain for another step.
//
// The prefix cut is the longest one whose events are all older than the
// cutoff: an event with an out-of-order time keeps the events after it, so
// retention never deletes an event younger than the retention.
func PruneStep(ctx context.Context, q PruneTx, tenant, chain string, cutoffMS, nowMS, max int64) (deleted int64, more bool, err error) {
	cp, hasCP, err := q.Checkpoint(ctx)
	if err != nil {
		return 0, false, err
	}
	first, head, ok, err := q.Bounds(ctx)
	if err != nil || !ok {
		return 0, false, err
	}
	wantFirst := int64(1)
	if hasCP {
		if ComputeCheckpointHash(cp) != cp.CheckpointHash || cp.Tenant != tenant || cp.Chain != chain {
			return 0, false, fmt.Errorf("%w: tenant %q chain %q: checkpoint does not match its hash", ErrBrokenChain, tenant, chain)
		}
		wantFirst = cp.Seq + 1
	}
	if first != wantFirst {
		return 0, false, fmt.Errorf("%w: tenant %q chain %q starts at seq %d, want %d", ErrBrokenChain, tenant, chain, first, wantFirst)
	}
	end := head - 1 // the head stays, so that the chain continues from it
	young, ok, err := q.FirstYoung(ctx, cutoffMS)
	if err != nil {
		return 0, false, err
	}
	if ok && young-1 < end {
		end = young - 1
	}
	if end-first+1 > max {
		end, more = first+max-1, true
	}
	if end < first {
		return 0, false, nil
	}
	hash, err := q.HashAt(ctx, end)
	if err != nil {
		return 0, false, err
	}
	n, err := q.DeleteRange(ctx, first, end)
	if err != nil {
		return 0, false, err
	}
	if n != end-first+1 {
		return 0, false, fmt.Errorf("%w: tenant %q chain %q has a gap before seq %d", ErrBrokenChain, tenant, chain, end+1)
	}
	c := Checkpoint{Tenant: tenant, Chain: chain, Seq: end, Hash: hash, PrunedBeforeMS: cutoffMS, CreatedMS: nowMS}
	c.CheckpointHash = ComputeCheckpointHash(c)
	if err := q.PutCheckpoint(ctx, c); err != nil {
		return 0, false, err
	}
	return n, more, nil
}

// ChainKey names one (tenant, chain).
type ChainKey struct{ Tenant, Chain string }

// PruneChains runs step on every chain until it reports no more, one
// transaction per step. A broken chain is skipped and reported; any other
// error stops the prune.
func PruneChains(chains []ChainKey, step func(ChainKey) (int64, bool, error)) (PruneResult, error) {
	var res PruneResult
	var broken []error
	for _, k := range chains {
		cut := false
		for {
			n, more, err := step(k)
			if errors.Is(err, ErrBrokenChain) {
				broken = append(broken, err)
				break
			}
			if err != nil {
				return res, err
			}
			if n > 0 {
				res.Events += n
				cut = true
			}
			if !more {
				break
			}
		}
		if cut {
			res.Chains++
		}
	}
	return res, errors.Join(broken...)
}

// Prune deletes the events older than cutoff from the store (see
// Store.Prune), counts them in toolgate_audit_pruned_events_total and
// logs what it did. The remaining events still verify: Verify starts each
// cut chain from its checkpoint. A broken chain is left as it is and
// reported with ErrBrokenChain, after the other chains were pruned.
func (l *Log) Prune(ctx context.Context, cutoff time.Time) (PruneResult, error) {
	res, err := l.store.Prune(ctx, cutoff)
	l.m.pruned.Add(float64(res.Events))
	if res.Events > 0 {
		l.logger.Info("audit events pruned", "events", res.Events, "chains", res.Chains, "cutoff", FormatTime(cutoff))
	}
	if err != nil {
		if errors.Is(err, ErrBrokenChain) {
			l.logger.Warn("audit chain not pruned: it does not verify", "err", err)
			return res, err
		}
		return res, storeErr(err)
	}
	return res, nil
}
