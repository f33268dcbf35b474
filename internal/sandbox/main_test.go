package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/command"
)

// Environment variables that turn the test binary into something other than
// a test run, so the tests need no binary besides themselves:
//   - envHelper=1: act as "gateway sandbox-exec" (the re-exec helper).
//   - envProgram=OP[:ARG]: act as a confined program that tries one
//     operation (see programOps) and exits 0 when it works, 3 when it
//     fails.
const (
	envHelper      = "SANDBOX_TEST_HELPER"
	envProgram     = "SANDBOX_TEST_PROGRAM"
	envFakeStage1  = "SANDBOX_TEST_FAKE_STAGE1"
	envFakeGateway = "SANDBOX_TEST_FAKE_GATEWAY"
)

// programOps are the operations a test program can try.
var programOps = map[string]func(arg string) error{
	"dial-tcp": func(addr string) error { return closeErr(net.Dial("tcp", addr)) },
	"dial-mptcp": func(addr string) error {
		var d net.Dialer
		d.SetMultipathTCP(true)
		return closeErr(d.DialContext(context.Background(), "tcp", addr))
	},
	"dial-unix":  func(addr string) error { return closeErr(net.Dial("unix", addr)) },
	"listen-tcp": func(addr string) error { return closeErr(net.Listen("tcp", addr)) },
	"send-udp": func(addr string) error {
		c, err := net.Dial("udp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write([]byte("x"))
		return err
	},
	"io-uring": func(string) error { return ioUringSetup() },
	"argv0": func(string) error {
		_, err := fmt.Print(os.Args[0])
		return err
	},
}

func closeErr(c io.Closer, err error) error {
	if err != nil {
		return err
	}
	return c.Close()
}

func TestMain(m *testing.M) {
	// A stand-in for a jail's stage 1 of some gateway (the sweep test):
	// it only waits.
	if os.Getenv(envFakeStage1) == "1" {
		_, _ = io.Copy(io.Discard, os.Stdin)
		select {}
	}
	// A stand-in for a gateway (the lifeline test): it starts one jail and
	// waits to be killed.
	if ws := os.Getenv(envFakeGateway); ws != "" {
		os.Exit(fakeGateway(ws))
	}
	// Every stage of the jail helper is this binary with the sub-command
	// first (programs the helper starts never have it).
	if len(os.Args) > 1 && os.Args[1] == SubCommand {
		os.Unsetenv(envHelper)
		os.Exit(Main(os.Args[2:], Payloads{command.PayloadName: command.RunInJail}))
	}
	if spec := os.Getenv(envProgram); spec != "" {
		name, arg, _ := strings.Cut(spec, ":")
		op, ok := programOps[name]
		if !ok {
			fmt.Fprintln(os.Stderr, "test program: unknown op", name)
			os.Exit(2)
		}
		if err := op(arg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if errors.Is(err, errUnsupported) {
				os.Exit(4)
			}
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// errUnsupported is a test program's way of saying the operation cannot be
// tried on this system at all (exit 4).
var errUnsupported = errors.New("unsupported here")
