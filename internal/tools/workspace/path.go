package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/wspath"
)

// resolvePath resolves the workspace-relative name of a file tool's path
// argument with the one resolver of workspace paths (internal/wspath):
// mode is wspath.MustExist, or wspath.MayBeMissing for write-file.
func resolvePath(root *os.Root, name string, mode wspath.Mode) (wspath.Resolved, error) {
	return wspath.Resolve(root, name, wspath.Options{Mode: mode, Pointer: "/path"})
}

// stillSame re-resolves a prepared target and reports whether it still
// resolves to the same path and file. Run uses it to tell a changed target
// from an ordinary I/O error after an open fails.
func stillSame(root *os.Root, r wspath.Resolved) bool {
	mode := wspath.MustExist
	if r.Info == nil {
		mode = wspath.MayBeMissing
	}
	now, err := resolvePath(root, r.Rel, mode)
	if err != nil || now.Rel != r.Rel {
		return false
	}
	if r.Info != nil {
		return wspath.SameIdentity(r.Info, now.Info)
	}
	return now.Info == nil && now.Parent == r.Parent && wspath.SameIdentity(r.ParentInfo, now.ParentInfo)
}

// errChanged wraps tools.ErrTargetChanged with what was found.
func errChanged(what string) error {
	return fmt.Errorf("workspace: %s: %w", what, tools.ErrTargetChanged)
}

// openErr classifies a failure to open a prepared target: a target that no
// longer resolves as prepared is a change, anything else an I/O error.
func openErr(root *os.Root, r wspath.Resolved, err error) error {
	if !stillSame(root, r) {
		return fmt.Errorf("workspace: open: %w (%v)", tools.ErrTargetChanged, err)
	}
	if errors.Is(err, fs.ErrPermission) {
		return &tools.ModelError{Message: "permission denied"}
	}
	return fmt.Errorf("workspace: open: %w", err)
}
