//go:build !linux

package sandbox

import (
	"errors"
	"os/exec"
)

// Jailer starts programs in jails; it exists only on Linux.
type Jailer struct{}

// NewJailer always fails here: the jail is built from Linux namespaces.
func NewJailer(JailerOptions) (*Jailer, JailStatus, error) {
	st := JailStatus{Mode: ModeJail, Reason: "the command jail needs Linux"}
	return nil, st, errors.New("sandbox: " + st.Reason)
}

func (j *Jailer) Status() JailStatus  { return JailStatus{} }
func (j *Jailer) Close() error        { return nil }
func (j *Jailer) UID() (uid, gid int) { return -1, -1 }
func (j *Jailer) Start(Job) (*Running, error) {
	return nil, errors.New("sandbox: the command jail needs Linux")
}
func (j *Jailer) Wrap(*exec.Cmd, Jail) (func(), error) {
	return nil, errors.New("sandbox: the command jail needs Linux")
}

// Running is a started jail; it exists only on Linux.
type Running struct{}

func (r *Running) Wait() Exit            { return Exit{Code: ExitConfineFailed} }
func (r *Running) Done() <-chan struct{} { c := make(chan struct{}); close(c); return c }
func (r *Running) Stop()                 {}
func (r *Running) Kill()                 {}

func runStage1([]string) int          { return ExitConfineFailed }
func runStage2([]string) int          { return ExitConfineFailed }
func runInit([]string) int            { return ExitConfineFailed }
func runPayload(string, Payloads) int { return ExitConfineFailed }

// StartLandlock needs Linux.
func StartLandlock(Job, Policy, string) (*Running, error) {
	return nil, errors.New("sandbox: Landlock needs Linux")
}

// OwnWorkspace needs Linux.
func (j *Jailer) OwnWorkspace(string) error {
	return errors.New("sandbox: the command jail needs Linux")
}
