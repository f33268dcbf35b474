package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Wrap rewrites cmd, before Start, so that it runs under confinement p:
// cmd.Path becomes self and cmd.Args becomes
//
//	self sandbox-exec --write=DIR... [--read=DIR...] [--net] [--argv0=NAME] -- PATH ARGS[1:]...
//
// Everything else (Dir, Env, Stdin, Stdout, Stderr, ExtraFiles, SysProcAttr,
// Cancel, WaitDelay) is kept, and because the helper execs the program in
// place, the started process is the program itself: same pid, same process
// group, so signals and group kills reach it.
//
// self is the path of a binary that dispatches "sandbox-exec" to [Main]
// (normally the gateway binary); "" means os.Executable().
//
// When the kernel has no confinement mechanism ([Probe] reports "none"),
// Wrap leaves cmd unchanged and returns an error wrapping [ErrUnavailable];
// the caller decides whether to run it unconfined. On any other error cmd is
// also left unchanged.
//
// Network=false is enforced only when Probe().Network is true; a caller
// that must not run a command with network access on an older kernel checks
// that first.
func Wrap(cmd *exec.Cmd, p Policy, self string) error {
	return wrap(cmd, p, self, Probe())
}

// wrap is Wrap with the kernel status passed in, so both branches can be
// tested on any machine.
func wrap(cmd *exec.Cmd, p Policy, self string, st Status) error {
	if st.Mechanism != MechanismLandlock {
		return fmt.Errorf("%w: %s", ErrUnavailable, st.Reason)
	}
	if cmd == nil {
		return errors.New("sandbox: nil command")
	}
	if cmd.Process != nil {
		return errors.New("sandbox: command already started")
	}
	if cmd.Err != nil {
		// exec.Command could not resolve the program; Start will report it.
		return cmd.Err
	}
	if cmd.Path == "" {
		return errors.New("sandbox: command has no path")
	}
	if self == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("sandbox: locating the helper binary: %w", err)
		}
		self = exe
	}
	if !filepath.IsAbs(self) {
		// A relative helper path would be resolved against cmd.Dir.
		return errors.New("sandbox: helper path must be absolute")
	}
	args, err := helperArgs(cmd.Path, cmd.Args, p)
	if err != nil {
		return err
	}
	cmd.Path = self
	cmd.Args = append([]string{self}, args...)
	return nil
}

// helperArgs builds the argument list after the helper binary's name: the
// sub-command, the flags encoding p, and the original program and argv.
func helperArgs(path string, argv []string, p Policy) ([]string, error) {
	out := []string{SubCommand}
	for _, d := range p.WritableDirs {
		abs, err := absDir(d)
		if err != nil {
			return nil, err
		}
		out = append(out, "--write="+abs)
	}
	for _, d := range p.ReadableDirs {
		abs, err := absDir(d)
		if err != nil {
			return nil, err
		}
		out = append(out, "--read="+abs)
	}
	if p.Network {
		out = append(out, "--net")
	}
	rest := []string(nil)
	if len(argv) > 0 {
		if argv[0] != path {
			out = append(out, "--argv0="+argv[0])
		}
		rest = argv[1:]
	}
	out = append(out, "--", path)
	return append(out, rest...), nil
}

// absDir makes a policy directory absolute and clean. The helper runs in
// cmd.Dir, so a relative directory must be fixed here, where the caller
// meant it.
func absDir(d string) (string, error) {
	if d == "" || strings.ContainsRune(d, 0) {
		return "", errors.New("sandbox: invalid directory in policy")
	}
	abs, err := filepath.Abs(d)
	if err != nil {
		return "", fmt.Errorf("sandbox: invalid directory in policy: %w", err)
	}
	return abs, nil
}
