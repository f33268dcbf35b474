package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"
)

// Messages written into a command's output when something is refused at
// run time. They never name a host path (nothing of the host is visible
// in the jail anyway).
const (
	cpuNotice   = "[killed: CPU time limit]\n"
	fsizeNotice = "[killed: file size limit]\n"
	// StatusRefused is the status of a refused program, as a shell reports
	// one it found but could not run.
	StatusRefused  = 126
	statusNotFound = 127
	// maxRefusedRecorded bounds the refusals a report lists.
	maxRefusedRecorded = 64
)

// refusedName replaces the name of a guarded builtin the call handler
// refuses. No function or builtin can have it, so the call reaches the exec
// handler, which reports the refusal.
const refusedName = "\x00refused"

// guardedBuiltins run other code or replace the shell; they run only when
// the call is itself an approved segment.
var guardedBuiltins = map[string]bool{
	"eval": true, "source": true, ".": true, "exec": true, "trap": true, "builtin": true, "command": true,
}

// Redirect refusals, as the interpreter prints them ("open NAME: …").
var (
	errNotDecided   = errors.New("refused: a redirect target policy did not see")
	errNotRegular   = errors.New("refused: not a regular file")
	errNotWorkspace = errors.New("refused: outside the workspace")
)

// interpreter is one run of a decided command inside the jail.
type interpreter struct {
	spec      *Spec
	file      *syntax.File
	approved  Approved
	redirects map[string]bool

	mu     sync.Mutex
	report Report
}

// RunInJail is the jail's shell payload: it runs as its own process inside
// the jail (as the jail's user, without privileges, after the jail's init
// started it), reads the Spec from specData, interprets the command with
// mvdan.cc/sh/v3/interp on standard input and output (stdout and stderr
// are one stream), writes a Report line to report and returns the shell's
// exit status. Nothing it checks is the boundary — the jail is — but it
// keeps what runs to what was decided, and it is not dumpable, so the
// programs it starts cannot read or write its memory.
func RunInJail(specData []byte, report *os.File) int {
	// First: programs of the same user must not ptrace it or read its
	// memory, environment or descriptors.
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	debug.SetTraceback("none")
	if report != nil {
		_, _ = unix.FcntlInt(report.Fd(), unix.F_SETFD, unix.FD_CLOEXEC)
	}
	ip, err := newInterpreter(specData)
	if err != nil {
		writeReport(report, Report{Error: err.Error()})
		fmt.Fprintln(os.Stdout, "[failed: the command could not run]")
		return StatusRefused
	}
	// A stop request (the jail's init relays SIGTERM to every process of
	// the jail) ends the interpreter at once, as it ends a shell; its
	// programs got the signal too. Every other signal a program could send
	// it is ignored, so that no crash output of its own reaches the
	// result.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs)
	go func() {
		for s := range sigs {
			switch s {
			case syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP:
				ip.mu.Lock()
				writeReport(report, ip.report)
				os.Exit(128 + int(s.(syscall.Signal)))
			}
		}
	}()
	code := ip.run(context.Background())
	ip.mu.Lock()
	writeReport(report, ip.report)
	ip.mu.Unlock()
	return code
}

// writeReport writes r as one JSON line; errors are ignored (the gateway
// treats a missing report as "nothing refused").
func writeReport(w io.Writer, r Report) {
	if w == nil {
		return
	}
	b, err := json.Marshal(r)
	if err != nil {
		return
	}
	_, _ = w.Write(append(b, '\n'))
}

func newInterpreter(specData []byte) (*interpreter, error) {
	var s Spec
	if err := json.Unmarshal(specData, &s); err != nil {
		return nil, fmt.Errorf("bad spec: %v", err)
	}
	f, a, err := parseSpec(&s)
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(s.Workspace) || !filepath.IsAbs(s.Dir) || !within(s.Workspace, s.Dir) {
		return nil, errors.New("bad spec: folders")
	}
	var st unix.Stat_t
	if err := unix.Stat(s.Dir, &st); err != nil || uint64(st.Dev) != s.DirDev || st.Ino != s.DirIno {
		return nil, errors.New("the working folder changed since the call was decided")
	}
	ip := &interpreter{spec: &s, file: f, approved: NewApproved(a.Words, s.Home), redirects: map[string]bool{}}
	for _, p := range s.Redirects {
		ip.redirects[filepath.Clean(p)] = true
	}
	return ip, nil
}

// run interprets the file until it ends or ctx is done, and returns the
// shell's exit status.
func (ip *interpreter) run(ctx context.Context) int {
	r, err := interp.New(
		interp.StdIO(os.Stdin, os.Stdout, os.Stdout),
		interp.Dir(ip.spec.Dir),
		interp.Env(expand.ListEnviron(ip.spec.Env...)),
		interp.CallHandler(ip.call),
		interp.ExecHandlers(func(interp.ExecHandlerFunc) interp.ExecHandlerFunc { return ip.exec }),
		interp.OpenHandler(ip.open),
		interp.ReadDirHandler2(readDir),
	)
	if err != nil {
		ip.fail(err)
		return StatusRefused
	}
	err = r.Run(ctx, ip.file)
	if err == nil {
		return 0
	}
	if st, ok := interp.IsExitStatus(err); ok {
		return int(st)
	}
	ip.fail(err)
	return StatusRefused
}

func (ip *interpreter) fail(err error) {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	ip.report.Error = err.Error()
}

func (ip *interpreter) recordRefused(name string) {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	if len(ip.report.Refused) < maxRefusedRecorded {
		ip.report.Refused = append(ip.report.Refused, name)
	}
}

// call sees every simple command, builtins included.
func (ip *interpreter) call(_ context.Context, args []string) ([]string, error) {
	if guardedBuiltins[args[0]] && !ip.approved.Match(args) {
		return []string{refusedName, args[0]}, nil
	}
	return args, nil
}

// exec runs one program the interpreter wants to execute, if approved.
func (ip *interpreter) exec(ctx context.Context, args []string) error {
	hc := interp.HandlerCtx(ctx)
	refuse := func(name, notice string) error {
		ip.recordRefused(ip.display(name))
		io.WriteString(hc.Stderr, notice)
		return interp.ExitStatus(StatusRefused)
	}
	if args[0] == refusedName {
		return refuse(args[1], RefusedNotice)
	}
	if !ip.approved.Match(args) {
		return refuse(args[0], RefusedNotice)
	}
	if !within(ip.spec.Workspace, hc.Dir) {
		return refuse(args[0], RefusedDirNotice)
	}
	// Look up in the decided PATH, never one the script assigned.
	resolved, err := interp.LookPathDir(hc.Dir, expand.ListEnviron("PATH="+ip.spec.Path), args[0])
	if err != nil {
		fmt.Fprintf(hc.Stderr, "%s: command not found\n", ip.display(args[0]))
		return interp.ExitStatus(statusNotFound)
	}
	prog, ok := ip.spec.Pins.Check(args[0], resolved)
	if !ok {
		return refuse(args[0], RefusedPinNotice)
	}
	return ip.start(ctx, hc, prog, args)
}

// start runs prog and waits for it. The jail ends every process when the
// command ends, so nothing needs a process group of its own.
func (ip *interpreter) start(ctx context.Context, hc interp.HandlerContext, prog string, args []string) error {
	cmd := exec.Command(prog)
	cmd.Args = args
	cmd.Env = execEnv(hc.Env)
	cmd.Dir = hc.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = hc.Stdin, hc.Stdout, hc.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(hc.Stderr, "%s: cannot execute: %s\n", ip.display(args[0]), errText(err))
		return interp.ExitStatus(StatusRefused)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			switch ws.Signal() {
			case syscall.SIGXCPU:
				io.WriteString(hc.Stderr, cpuNotice)
			case syscall.SIGXFSZ:
				io.WriteString(hc.Stderr, fsizeNotice)
			}
			return interp.ExitStatus(128 + int(ws.Signal()))
		}
		return interp.ExitStatus(ee.ExitCode())
	}
	return fmt.Errorf("wait: %w", err)
}

// display spells a program name for the output without the jail's
// workspace path: it becomes "~/…", as the command would have written it.
func (ip *interpreter) display(name string) string {
	ws := ip.spec.Workspace
	if rel, ok := strings.CutPrefix(name, ws+"/"); ok {
		return "~/" + rel
	}
	if name == ws {
		return "~"
	}
	return name
}

// open is every file the interpreter itself opens (redirects; source and
// . when approved): only a decided redirect target (or /dev/null), only
// a regular file, never anything that could block (a FIFO, a device, a
// socket) — checked on what is really opened, not on the name.
func (ip *interpreter) open(ctx context.Context, path string, flag int, perm os.FileMode) (io.ReadWriteCloser, error) {
	if path == os.DevNull {
		return os.OpenFile(os.DevNull, flag, perm)
	}
	hc := interp.HandlerCtx(ctx)
	abs := path
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(hc.Dir, path)
	}
	abs = filepath.Clean(abs)
	refuse := func(err error) (io.ReadWriteCloser, error) {
		ip.mu.Lock()
		ip.report.RefusedOpens++
		ip.mu.Unlock()
		// The interpreter prints this error: "open PATH: refused: …".
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	if !within(ip.spec.Workspace, abs) {
		return refuse(errNotWorkspace)
	}
	if !ip.redirects[abs] {
		return refuse(errNotDecided)
	}
	f, err := openRegular(abs, flag, perm)
	if errors.Is(err, errNotRegular) {
		return refuse(err)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: errnoOnly(err)}
	}
	return f, nil
}

// openRegular opens p with flag only if it is (or is created as) a regular
// file. The file is first looked at through an O_PATH descriptor, which
// opens nothing and cannot block; the real open goes through that very
// descriptor (/proc/self/fd), and the result is checked again.
func openRegular(p string, flag int, perm os.FileMode) (*os.File, error) {
	pfd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
	switch {
	case err == nil:
	case errors.Is(err, unix.ENOENT) && flag&os.O_CREATE != 0:
		// A new file: created exclusively, not following a symlink, and
		// non-blocking in case something else appeared under the name.
		fd, err := unix.Open(p, (flag|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC)&^unix.O_TRUNC, uint32(perm.Perm()))
		if err != nil {
			return nil, err
		}
		return regularFile(fd, p)
	default:
		return nil, err
	}
	defer unix.Close(pfd)
	var st unix.Stat_t
	if err := unix.Fstat(pfd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, errNotRegular
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(pfd), (flag|unix.O_NONBLOCK|unix.O_CLOEXEC)&^unix.O_CREAT, 0)
	if err != nil {
		return nil, err
	}
	var st2 unix.Stat_t
	if err := unix.Fstat(fd, &st2); err != nil || st2.Dev != st.Dev || st2.Ino != st.Ino {
		unix.Close(fd)
		return nil, errNotRegular
	}
	return regularFile(fd, p)
}

// regularFile checks fd is a regular file, makes it blocking again and
// wraps it.
func regularFile(fd int, name string) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, errNotRegular
	}
	fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err == nil {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFL, fl&^unix.O_NONBLOCK)
	}
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// readDir lists a folder for globbing; one that cannot be read (a hidden
// path is an unreadable mount) matches nothing, as in other shells, rather
// than failing the command.
func readDir(_ context.Context, p string) ([]fs.DirEntry, error) {
	ents, err := os.ReadDir(p)
	if err != nil && (errors.Is(err, fs.ErrPermission) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ENOTDIR)) {
		return nil, nil
	}
	return ents, err
}

// within reports whether p is root or below it (both clean and absolute).
func within(root, p string) bool {
	return p == root || strings.HasPrefix(p, root+"/") || root == "/"
}

// execEnv is the environment of an executed program: the interpreter's
// exported string variables (the spec's environment plus what the script
// itself exported), minus variables that change how a program is loaded.
func execEnv(env expand.Environ) []string {
	vals := map[string]string{}
	var order []string
	env.Each(func(name string, vr expand.Variable) bool {
		if !vr.IsSet() {
			delete(vals, name)
			return true
		}
		if vr.Exported && vr.Kind == expand.String && !LoaderVariable(name) {
			if _, ok := vals[name]; !ok {
				order = append(order, name)
			}
			vals[name] = vr.String()
		}
		return true
	})
	out := make([]string, 0, len(vals))
	for _, name := range order {
		if v, ok := vals[name]; ok {
			out = append(out, name+"="+v)
		}
	}
	return out
}

// LoaderVariable reports environment variables that change how a program
// is loaded or which shell start-up file runs; no program gets them.
func LoaderVariable(name string) bool {
	return strings.HasPrefix(name, "LD_") || strings.HasPrefix(name, "DYLD_") || name == "BASH_ENV" || name == "ENV"
}

// errText renders an exec error without a path.
func errText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	var ee *exec.Error
	if errors.As(err, &ee) {
		return errText(ee.Err)
	}
	return err.Error()
}

// errnoOnly strips a path from err.
func errnoOnly(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
