package tools

import "context"

// Quota is the disk quota of a workspace (limits.workspace_bytes) as the
// tools see it; the gateway attaches one to every workspace
// (*quota.Meter implements it).
type Quota interface {
	// Room is how many more bytes the workspace may take according to
	// the last measurement; 0 or less when it is full.
	Room() int64
	// Full reports whether the workspace is at or over its limit.
	Full() bool
	// Hard reports whether the kernel enforces the limit itself (a btrfs
	// qgroup); otherwise the tools are what keeps a workspace to it.
	Hard() bool
	// Changed says the workspace may have changed size: it is measured
	// again off the caller's path. The ticket is for Measured.
	Changed() uint64
	// Measured waits until a measurement that started after ticket was
	// handed out has ended, or ctx ends.
	Measured(ctx context.Context, ticket uint64) error
}

// WorkspaceFullMessage is what the model reads when a write is refused
// because the workspace is full.
const WorkspaceFullMessage = "workspace is full (limits.workspace_bytes)"

// WorkspaceFullNote is the line a command's result carries when its
// workspace was, or became, full.
const WorkspaceFullNote = "[workspace full (limits.workspace_bytes): writes refused]"

// ErrWorkspaceFull returns the model-facing error of a write refused
// because the workspace is full.
func ErrWorkspaceFull() error { return &ModelError{Message: WorkspaceFullMessage} }

// SetQuota attaches the workspace's disk quota; call it before the
// workspace serves any call.
func (w *Workspace) SetQuota(q Quota) { w.quota = q }

// Quota is the workspace's disk quota, nil when it has none.
func (w *Workspace) Quota() Quota {
	if w == nil {
		return nil
	}
	return w.quota
}
