package shell

import (
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/internal/tools"
)

// Stable error codes. Every model-facing error starts with one of them.
const (
	CodeNotFound      = "not_found"
	CodeQuotaExceeded = "quota_exceeded"
	CodeInputTooLarge = "input_too_large"
	CodeProcessExited = "process_exited"
	CodeStdinClosed   = "stdin_closed"
)

var (
	// errNoSession is what session-scoped tools return without a session.
	errNoSession = &tools.ArgError{Pointer: "", Rule: "requires a session_id in the call"}
	// errNotFound is the one answer for a missing process and for one of
	// another session or tenant, so that ids cannot be probed.
	errNotFound = &tools.ArgError{Pointer: "/process_id", Rule: CodeNotFound + ": no such process"}

	errQuota       = &tools.ModelError{Message: CodeQuotaExceeded + ": too many running processes"}
	errExited      = &tools.ModelError{Message: CodeProcessExited + ": the process has exited"}
	errStdinClosed = &tools.ModelError{Message: CodeStdinClosed + ": the process's standard input is closed"}
	errNoWorkspace = errors.New("shell: no workspace in env")
	errClosed      = errors.New("shell: supervisor closed")
	errBadArtifact = errors.New("shell: artifact of an unexpected type")
	errConfine     = errors.New("shell: confinement hook failed")
	errWithheld    = errors.New("shell: commands are withheld: the command jail is unavailable")
	errInterpreter = errors.New("shell: interpreter")
)

func errBadAllowlist(entry string) error {
	return fmt.Errorf("shell: environment allowlist entry %q is not NAME or NAME=VALUE", entry)
}
