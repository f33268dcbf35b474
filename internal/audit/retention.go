package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/toolgate/toolgate/internal/lifecycle"
)

// Checkpoint records where retention of the hash-chain era cut a (tenant,
// chain): Seq and Hash are those of the last pruned event, so the first
// remaining event must have seq Seq+1 and prev_hash Hash. Verify starts
// the chain from it. Retention no longer writes these (the tree records
// its cut, TreeHead.Pruned), but a database pruned before the tree keeps
// them.
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
	Events  int64 // events deleted
	Tenants int   // tenants whose log was cut
}

// ErrBrokenChain: Prune refused a tenant whose log has a gap in its log
// indexes where it would cut; pruning would erase the evidence. Verify
// reports the same log as bad.
var ErrBrokenChain = errors.New("audit: log broken; not pruned")

// PruneBatch bounds the events one prune transaction deletes, so that a
// first prune of a large store does not hold the write lock for long.
const PruneBatch = 10000

// pruneBatcher is a Store that prunes in smaller steps (tests).
type pruneBatcher interface{ PruneBatch() int }

// Prune deletes, for every tenant, the longest prefix of its log (in log
// order) whose events are all older than cutoff, in steps of at most
// PruneBatch events per transaction, each under the tenant's tree lock.
// The tree keeps its nodes: what remains still hashes into every
// checkpoint, and Verify starts from the cut (TreeHead.Pruned). An event
// with an out-of-order time keeps the events after it, so retention
// never deletes an event younger than the retention. Only integrated
// events are pruned. It counts the events in
// toolgate_audit_pruned_events_total and logs what it did. A tenant whose
// log has a gap at the cut is left as it is and reported with
// ErrBrokenChain, after the other tenants were pruned.
func (l *Log) Prune(ctx context.Context, cutoff time.Time) (PruneResult, error) {
	res, err := l.prune(ctx, cutoff)
	l.m.pruned.Add(float64(res.Events))
	if res.Events > 0 {
		l.logger.Info("audit events pruned", "events", res.Events, "tenants", res.Tenants, "cutoff", FormatTime(cutoff))
	}
	if err != nil {
		if errors.Is(err, ErrBrokenChain) {
			l.logger.Warn("audit log not pruned: it does not verify", "err", err)
			return res, err
		}
		return res, storeErr(err)
	}
	return res, nil
}

func (l *Log) prune(ctx context.Context, cutoff time.Time) (PruneResult, error) {
	var res PruneResult
	tenants, err := l.store.Tenants(ctx)
	if err != nil {
		return res, err
	}
	batch := PruneBatch
	if pb, ok := l.store.(pruneBatcher); ok && pb.PruneBatch() > 0 {
		batch = pb.PruneBatch()
	}
	cutoffMS := cutoff.UnixMilli()
	var broken []error
	for _, tenant := range tenants {
		cut := false
		for {
			var n int64
			var more bool
			_, err := l.store.Integrate(ctx, tenant, true, func(ctx context.Context, tx TreeTx) error {
				var err error
				n, more, err = pruneStep(ctx, tx, tenant, cutoffMS, batch)
				return err
			})
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
			res.Tenants++
		}
	}
	return res, errors.Join(broken...)
}

// pruneStep cuts at most max events off the front of one tenant's log.
func pruneStep(ctx context.Context, tx TreeTx, tenant string, cutoffMS int64, max int) (deleted int64, more bool, err error) {
	head, err := tx.Tree(ctx)
	if err != nil {
		return 0, false, err
	}
	from := head.Pruned
	indexes, times, err := tx.Ages(ctx, from, max)
	if err != nil {
		return 0, false, err
	}
	to := from
	for i, idx := range indexes {
		if idx != from+int64(i) {
			return 0, false, fmt.Errorf("%w: tenant %q has no event at log_index %d", ErrBrokenChain, tenant, from+int64(i))
		}
		if times[i] >= cutoffMS {
			break
		}
		to++
	}
	if to == from {
		return 0, false, nil
	}
	n, err := tx.Prune(ctx, from, to, cutoffMS)
	if err != nil {
		return 0, false, err
	}
	if n != to-from {
		return 0, false, fmt.Errorf("%w: tenant %q lost events below log_index %d", ErrBrokenChain, tenant, to)
	}
	return n, to-from == int64(max) && to < head.Size, nil
}

// PruneInterval is how often retention runs: a tenth of the retention, so
// that nothing outlives it by more than 10%, and at least hourly, so that
// each run has little to delete.
func PruneInterval(retention time.Duration) time.Duration {
	return min(retention/10, time.Hour)
}

// Retention is the background work that prunes the log of events older
// than retention (on the log's clock) at once and then every
// PruneInterval. Every replica runs it; the stores serialize concurrent
// prunes of one tenant. A failed run is logged and retried next time.
func (l *Log) Retention(retention time.Duration) lifecycle.Runner {
	return lifecycle.Every("audit retention", PruneInterval(retention), func(ctx context.Context) {
		l.PruneOlderThan(ctx, retention)
	})
}

// PruneOlderThan runs Prune once with the cutoff retention before now,
// logging a failure (Prune logs what it removed and refused) unless ctx
// ended (shutting down: the next start prunes the rest).
func (l *Log) PruneOlderThan(ctx context.Context, retention time.Duration) {
	cutoff := l.now().Add(-retention)
	res, err := l.Prune(ctx, cutoff)
	switch {
	case err != nil && ctx.Err() != nil:
	case err != nil:
		l.logger.Error("audit retention run failed", "err", err, "events_pruned", res.Events, "tenants", res.Tenants)
	default:
		l.logger.Debug("audit retention run", "events_pruned", res.Events, "tenants", res.Tenants, "cutoff", cutoff.UTC())
	}
}
