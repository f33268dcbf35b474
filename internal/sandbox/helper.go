package sandbox

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// helperConfig is the decoded command line of the sandbox-exec helper.
type helperConfig struct {
	write   []string
	read    []string
	network bool
	argv0   string
	path    string
	args    []string // argv[1:] of the program

	// The jail (--jail): see jail_linux.go.
	jail       bool
	stage2     bool     // in the jail's namespaces already (see runStage1)
	raw        []string // the arguments as received, for stage 2
	ws         string
	wsFD       int // idmapped workspace tree passed by the gateway; -1 for none
	cgFD       int // the jail's cgroup.procs, open for writing; -1 for none
	cgOOMFD    int // the jail's memory.oom_control; -1 for none
	wsWritable bool
	uid, gid   int // the user to become (gateway running as root); -1: stay
	hide       []string
	writable   []string
	exec       []string
	limits     Limits
}

// Main is the entry point of the hidden "gateway sandbox-exec" sub-command.
// args are the arguments after the sub-command name, as written by [Wrap]:
//
//	--write=DIR... [--read=DIR...] [--net] [--argv0=NAME] -- PROGRAM ARGS...
//
// Main confines the process with Landlock and replaces it with PROGRAM
// (looked up in the PATH of the inherited environment), so on success it
// never returns. It returns 126 without running PROGRAM when the arguments
// are malformed or any step of the confinement fails, and 127 when PROGRAM
// is not found. The reason goes to stderr, which the caller usually shows to
// the model, so it never names host paths.
func Main(args []string) int {
	if len(args) == 1 && args[0] == "--hold" {
		return hold()
	}
	return runHelper(args, os.Stderr)
}

func runHelper(args []string, stderr io.Writer) int {
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "sandbox-exec: "+format+"\n", a...)
		return code
	}
	cfg, err := parseHelperArgs(args)
	cfg.raw = args
	if err != nil {
		return fail(ExitConfineFailed, "%v", err)
	}
	argv0 := cfg.argv0
	if argv0 == "" {
		argv0 = cfg.path
	}
	argv := append([]string{argv0}, cfg.args...)
	if cfg.jail {
		return runJail(cfg, argv, os.Environ(), stderr)
	}
	path, err := exec.LookPath(cfg.path)
	if err != nil {
		return fail(ExitNotFound, "command not found")
	}
	// confineAndExec returns only on failure.
	code, err := confineAndExec(cfg, path, argv, os.Environ())
	return fail(code, "%v", err)
}

// parseHelperArgs decodes the helper's command line. The "--" before the
// program is required so that a program name can never be taken for a flag.
func parseHelperArgs(args []string) (helperConfig, error) {
	cfg := helperConfig{wsFD: -1, cgFD: -1, cgOOMFD: -1, uid: -1, gid: -1}
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
	fs.BoolVar(&cfg.jail, "jail", false, "run in a jail of its own namespaces")
	fs.BoolVar(&cfg.stage2, "stage2", false, "the jail's namespaces exist: build it (jail)")
	fs.StringVar(&cfg.ws, "ws", "", "workspace folder (jail)")
	fs.IntVar(&cfg.wsFD, "ws-fd", -1, "file descriptor of the idmapped workspace tree (jail)")
	fs.IntVar(&cfg.cgFD, "cg-fd", -1, "file descriptor of the jail's cgroup.procs (jail)")
	fs.IntVar(&cfg.cgOOMFD, "cg-oom-fd", -1, "file descriptor of the jail's memory.oom_control (jail)")
	fs.IntVar(&cfg.uid, "uid", -1, "user id to run as (jail)")
	fs.IntVar(&cfg.gid, "gid", -1, "group id to run as (jail)")
	fs.BoolVar(&cfg.wsWritable, "ws-writable", false, "the whole workspace is writable (jail)")
	list := func(name, usage string, dst *[]string) {
		fs.Func(name, usage, func(s string) error {
			*dst = append(*dst, s)
			return nil
		})
	}
	list("hide", "workspace glob to hide (jail)", &cfg.hide)
	list("writable", "workspace glob to make writable (jail)", &cfg.writable)
	list("exec", "absolute path or glob that may be executed (jail)", &cfg.exec)
	fs.Int64Var(&cfg.limits.MemoryBytes, "mem", 0, "memory per process, or per jail with a cgroup (jail)")
	fs.Int64Var(&cfg.limits.MaxProcesses, "nproc", 0, "processes (jail)")
	fs.Int64Var(&cfg.limits.CPUSeconds, "cpu", 0, "CPU seconds per process (jail)")
	fs.Int64Var(&cfg.limits.FileSizeBytes, "fsize", 0, "largest file (jail)")
	fs.Int64Var(&cfg.limits.OpenFiles, "nofile", 0, "open files (jail)")
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
	if cfg.jail {
		if !filepath.IsAbs(cfg.ws) || !filepath.IsAbs(cfg.path) {
			return cfg, errors.New("bad arguments: the jail needs an absolute workspace and program")
		}
		for _, g := range append(append([]string(nil), cfg.hide...), cfg.writable...) {
			if checkGlob(g, false) != nil {
				return cfg, errors.New("bad arguments: invalid workspace glob")
			}
		}
		for _, g := range cfg.exec {
			if checkGlob(g, true) != nil {
				return cfg, errors.New("bad arguments: invalid exec path")
			}
		}
		cfg.limits = cfg.limits.WithDefaults()
	}
	return cfg, nil
}
