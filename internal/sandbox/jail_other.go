//go:build !linux

package sandbox

import (
	"errors"
	"io"
	"os/exec"
)

// Jailer starts programs in jails; it exists only on Linux.
type Jailer struct{}

// NewJailer always fails here: the jail is built from Linux namespaces.
func NewJailer(JailerOptions) (*Jailer, JailStatus, error) {
	st := JailStatus{Mode: ModeJail, Reason: "the command jail needs Linux"}
	return nil, st, errors.New("sandbox: " + st.Reason)
}

func (j *Jailer) Status() JailStatus { return JailStatus{} }
func (j *Jailer) Close() error       { return nil }
func (j *Jailer) Wrap(*exec.Cmd, Jail) (func(), error) {
	return nil, errors.New("sandbox: the command jail needs Linux")
}

func runJail(helperConfig, []string, []string, io.Writer) int { return ExitConfineFailed }
func hold() int                                               { return 0 }
