//go:build !linux

package shell

import (
	"os/exec"
	"syscall"
)

// awaitLeader waits for the group leader, killing its group when the
// execution's kill context ends. Without waitid(WNOWAIT) the rest of the
// group is killed just after the leader is reaped, a small window in which
// the pgid could in theory be reused.
func (e *execution) awaitLeader(cmd *exec.Cmd, pgid int) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-e.killCtx.Done():
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		err = <-done
	}
	e.forget(pgid)
	return err
}
