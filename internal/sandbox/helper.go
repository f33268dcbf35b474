package sandbox

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// helperConfig is the decoded command line of the Landlock-only helper.
type helperConfig struct {
	write   []string
	read    []string
	network bool
	argv0   string
	path    string
	args    []string // argv[1:] of the program
}

// Payloads are the programs the helper can run inside a jail besides a
// plain program: the shell interpreter is one. Each runs in a process of
// its own, started by the jail's init, with the run's standard streams as
// 0, 1 and 2; it gets the job's data and a report writer (the gateway's
// diagnostic pipe, for one JSON line), and returns the exit status.
type Payloads map[string]func(data []byte, report *os.File) int

// Main is the entry point of the hidden "gateway sandbox-exec" sub-command
// (and of toolgate-sandbox). args are the arguments after the sub-command
// name. The jail's stages are
//
//	--stage1 --owner=ID [--mem-procs=FD] [--cpu-procs=FD] [--oom=FD]
//	--stage2 …, --init …, --payload=NAME
//
// (see stage_linux.go; everything else about the job comes through a
// descriptor, never the command line), and the Landlock-only mode is
//
//	--write=DIR... [--read=DIR...] [--net] [--argv0=NAME] -- PROGRAM ARGS...
//
// which confines the process with Landlock and replaces it with PROGRAM.
// On failure Main returns 126 without running anything (127 when the
// program is not found); the reason goes to stderr without host paths.
func Main(args []string, payloads Payloads) int {
	if len(args) > 0 {
		switch {
		case args[0] == "--stage1":
			return runStage1(args[1:])
		case args[0] == "--stage2":
			return runStage2(args[1:])
		case args[0] == "--init":
			return runInit(args[1:])
		case strings.HasPrefix(args[0], "--payload="):
			return runPayload(strings.TrimPrefix(args[0], "--payload="), payloads)
		}
	}
	return runHelper(args, os.Stderr)
}

func runHelper(args []string, stderr io.Writer) int {
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "sandbox-exec: "+format+"\n", a...)
		return code
	}
	cfg, err := parseHelperArgs(args)
	if err != nil {
		return fail(ExitConfineFailed, "%v", err)
	}
	argv0 := cfg.argv0
	if argv0 == "" {
		argv0 = cfg.path
	}
	argv := append([]string{argv0}, cfg.args...)
	path, err := exec.LookPath(cfg.path)
	if err != nil {
		return fail(ExitNotFound, "command not found")
	}
	// confineAndExec returns only on failure.
	code, err := confineAndExec(cfg, path, argv, os.Environ())
	return fail(code, "%v", err)
}

// parseHelperArgs decodes the Landlock-only helper's command line. The
// "--" before the program is required so that a program name can never be
// taken for a flag.
func parseHelperArgs(args []string) (helperConfig, error) {
	var cfg helperConfig
	fs := flag.NewFlagSet(SubCommand, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Func("write", "writable directory (repeatable)", func(s string) error {
		cfg.write = append(cfg.write, s)
		return nil
	})
	fs.Func("read", "readable directory (repeatable); restricts reads", func(s string) error {
		cfg.read = append(cfg.read, s)
		return nil
	})
	fs.BoolVar(&cfg.network, "net", false, "allow TCP connect and bind")
	fs.StringVar(&cfg.argv0, "argv0", "", "argv[0] of the program")
	if err := fs.Parse(args); err != nil {
		return cfg, errors.New("bad arguments")
	}
	// flag stops at "--" and consumes it; it stops at the first non-flag
	// without consuming anything, which is the case we reject.
	consumed := len(args) - fs.NArg()
	if consumed == 0 || args[consumed-1] != "--" {
		return cfg, errors.New("bad arguments: missing -- before the program")
	}
	rest := fs.Args()
	if len(rest) == 0 || rest[0] == "" {
		return cfg, errors.New("bad arguments: no program")
	}
	for _, d := range append(append([]string(nil), cfg.write...), cfg.read...) {
		if !filepath.IsAbs(d) {
			return cfg, errors.New("bad arguments: directories must be absolute")
		}
	}
	cfg.path, cfg.args = rest[0], rest[1:]
	return cfg, nil
}
