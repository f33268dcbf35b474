// Command toolgate-sandbox is the gateway's confinement helper on its own:
// the same code as `gateway sandbox-exec`, in a binary that imports nothing
// but the sandbox and the shell interpreter, so starting it costs well under a millisecond of
// initialisation instead of the gateway's ~11 ms (OPA, JSON Schema,
// Prometheus). The gateway uses it when it sits beside the gateway binary
// (or sandbox.helper names it) and re-executes itself otherwise. It is not
// meant to be run by hand.
package main

import (
	"fmt"
	"os"

	"github.com/toolgate/toolgate/internal/command"
	"github.com/toolgate/toolgate/internal/sandbox"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != sandbox.SubCommand {
		fmt.Fprintf(os.Stderr, "toolgate-sandbox is the gateway's confinement helper; the gateway starts it as %q\n", sandbox.SubCommand)
		os.Exit(2)
	}
	os.Exit(sandbox.Main(os.Args[2:], sandbox.Payloads{command.PayloadName: command.RunInJail}))
}
