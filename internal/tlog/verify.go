package tlog

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
)

// Problems VerifyLog and VerifyExtension report, each wrapped with the
// sizes and roots involved.
var (
	// ErrTruncated: the log has fewer entries than the checkpoint commits
	// to (entries were deleted, at the end or anywhere).
	ErrTruncated = errors.New("tlog: log is shorter than the checkpoint")
	// ErrRootMismatch: the log's first checkpoint-size entries do not hash
	// to the checkpoint's root (an entry was rewritten, replaced, inserted
	// or moved).
	ErrRootMismatch = errors.New("tlog: log does not hash to the checkpoint root")
	// ErrUncovered: the log holds the checkpoint's entries and more; the
	// extra entries are not covered by the checkpoint.
	ErrUncovered = errors.New("tlog: log has entries the checkpoint does not cover")
	// ErrRolledBack: a tree presented as current is smaller than a saved
	// checkpoint.
	ErrRolledBack = errors.New("tlog: tree is smaller than the saved checkpoint")
	// ErrInconsistent: a tree presented as current is not an append-only
	// extension of a saved checkpoint.
	ErrInconsistent = errors.New("tlog: tree is not an extension of the saved checkpoint")
)

// VerifyLog checks that entries (32-byte event hashes in log order, e.g.
// from an export) are exactly the log cp commits to: len(entries) must
// equal cp.Size and their tree's root must equal cp.Root. It reports the
// first problem: ErrTruncated when entries are missing, ErrRootMismatch
// when the first cp.Size entries hash to another root, ErrUncovered when
// they match but more entries follow. A caller that accepts a log that has
// grown since the checkpoint treats ErrUncovered as success for the
// covered prefix, and needs a newer checkpoint for the rest.
func VerifyLog(cp Checkpoint, entries [][]byte) error {
	n := uint64(len(entries))
	if n < cp.Size {
		return fmt.Errorf("%w: %d entries, checkpoint commits to %d (%d missing)", ErrTruncated, n, cp.Size, cp.Size-n)
	}
	root, err := RootOf(entries[:cp.Size])
	if err != nil {
		return err
	}
	if !bytes.Equal(root, cp.Root) {
		return fmt.Errorf("%w: the first %d entries hash to %s, checkpoint root is %s", ErrRootMismatch, cp.Size, b64(root), b64(cp.Root))
	}
	if n > cp.Size {
		return fmt.Errorf("%w: %d entries, checkpoint commits to the first %d", ErrUncovered, n, cp.Size)
	}
	return nil
}

// VerifyExtension checks that current (the store's tree size and root, or
// its latest checkpoint) is an append-only extension of saved (a
// checkpoint an auditor kept), with a consistency proof built from r. It
// fails with ErrRolledBack when current is smaller, ErrInconsistent when
// the proof does not tie the two roots together (for equal sizes: the
// roots differ), ErrWrongOrigin when both name an origin and they differ,
// and with the reader's error (e.g. ErrNodeNotFound) when nodes are
// missing. It does not check that stored entries hash to current.Root:
// VerifyLog (or recomputing the root from the entries) does that.
func VerifyExtension(ctx context.Context, r NodeReader, saved, current Checkpoint) error {
	if saved.Origin != "" && current.Origin != "" && saved.Origin != current.Origin {
		return fmt.Errorf("%w: saved checkpoint is of %q, current tree of %q", ErrWrongOrigin, saved.Origin, current.Origin)
	}
	if current.Size < saved.Size {
		return fmt.Errorf("%w: current size %d, saved checkpoint size %d", ErrRolledBack, current.Size, saved.Size)
	}
	p, err := ProveConsistency(ctx, r, saved.Size, current.Size)
	if err != nil {
		return err
	}
	if err := VerifyConsistency(p, saved, current); err != nil {
		return fmt.Errorf("%w: size %d root %s does not extend size %d root %s: %v", ErrInconsistent, current.Size, b64(current.Root), saved.Size, b64(saved.Root), err)
	}
	return nil
}

func b64(h []byte) string { return base64.StdEncoding.EncodeToString(h) }
