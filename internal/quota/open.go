package quota

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
)

// Open picks how the workspace at dir is held to limit (a positive number
// of bytes) and measures it once:
//
//   - BtrfsQgroup when dir is the root of a btrfs subvolume on a filesystem
//     whose quotas are enabled, and the gateway set the subvolume's qgroup
//     limit to limit (that needs root). A gateway that may not set it uses
//     the limit root prepared, when there is one no larger than limit.
//   - Accounting otherwise; Reason says why.
//
// An error with a Meter means the first measurement failed: the Meter
// works, and counts the workspace as full until a measurement succeeds.
func Open(dir string, limit int64, log *slog.Logger) (*Meter, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("quota: limit must be positive, got %d", limit)
	}
	c := choose(dir, limit)
	if c.mode == "" {
		c.mode, c.limit = Accounting, limit
		c.measure = func() (int64, error) { return Usage(dir) }
	}
	m := NewMeter(c.mode, c.limit, c.measure, log)
	m.reason = c.reason
	return m, m.Measure()
}

// choice is the mechanism chosen for one workspace; a zero mode means
// accounting.
type choice struct {
	mode    Mode
	limit   int64
	measure func() (int64, error)
	reason  string
}

// CreateWorkspace creates the missing workspace dir as a btrfs subvolume
// when its parent folder is on btrfs (so that a qgroup can bound it) and
// reports whether it did; anything else is left to the caller. An
// existing folder is never converted.
func CreateWorkspace(dir string) (bool, error) {
	if !CanCreateSubvolume(dir) {
		return false, nil
	}
	if err := createSubvolume(dir); err != nil {
		if errors.Is(err, os.ErrExist) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}
