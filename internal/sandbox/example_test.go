package sandbox_test

import (
	"errors"
	"log/slog"
	"os/exec"

	"github.com/toolgate/toolgate/internal/sandbox"
)

// A tool confines every command before starting it, and reports honestly
// when the kernel cannot.
func ExampleWrap() {
	cmd := exec.Command("git", "status")
	cmd.Dir = "/srv/workspaces/acme"
	err := sandbox.Wrap(cmd, sandbox.Policy{WritableDirs: []string{cmd.Dir}}, "")
	switch {
	case errors.Is(err, sandbox.ErrUnavailable):
		// No mechanism: run unconfined; /readyz says "none".
		slog.Warn("running unconfined", "reason", sandbox.Probe().Reason)
	case err != nil:
		return // never run a command that could not be wrapped
	}
	_ = cmd.Run()
}

// The gateway binary dispatches its hidden sub-command before anything
// else, so the helper starts fast and does nothing but confine and exec.
func ExampleMain() {
	// In cmd/gateway's main():
	//
	//	if len(os.Args) > 1 && os.Args[1] == sandbox.SubCommand {
	//		os.Exit(sandbox.Main(os.Args[2:]))
	//	}
}
