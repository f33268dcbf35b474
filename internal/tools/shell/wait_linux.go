package shell

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// awaitLeader waits for the group leader to exit, killing its group when
// the execution's kill context ends, then kills whatever the leader left in
// its group and reaps it. waitid(WNOWAIT) observes the exit without reaping,
// so the pid — and the pgid it leads — stays reserved until the group is
// dealt with.
func (e *execution) awaitLeader(cmd *exec.Cmd, pgid int) error {
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, pgid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err != unix.EINTR {
				return
			}
		}
	}()
	select {
	case <-exited:
	case <-e.killCtx.Done():
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-exited
	}
	e.forget(pgid)
	return cmd.Wait()
}
