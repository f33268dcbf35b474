package workspace

import (
	"errors"
	"syscall"

	"github.com/toolgate/toolgate/internal/tools"
)

// checkRoom refuses a write that would grow the workspace by more than
// the room its quota has left (nothing to check without a quota). A write
// that does not grow it passes even when the workspace is full: making a
// file smaller is how room is made.
func checkRoom(env *tools.Env, growth int64) error {
	q := env.Workspace.Quota()
	if q == nil || growth <= 0 || growth <= q.Room() {
		return nil
	}
	return tools.ErrWorkspaceFull()
}

// quotaErr turns the kernel's refusal of a write past the workspace's
// quota (a btrfs qgroup: EDQUOT) into the model-facing note; any other
// error is returned as it is.
func quotaErr(err error) error {
	if errors.Is(err, syscall.EDQUOT) {
		return tools.ErrWorkspaceFull()
	}
	return err
}

// remeasure has the workspace measured again after a write (off the
// caller's path).
func remeasure(env *tools.Env) {
	if q := env.Workspace.Quota(); q != nil {
		q.Changed()
	}
}
