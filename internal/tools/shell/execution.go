package shell

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"

	"github.com/toolgate/toolgate/internal/wspath"
)

// Messages written into a command's output when something is refused at
// run time. They never name a host path.
const (
	refusedNotice      = "[refused: a command that policy did not approve]\n"
	refusedDirNotice   = "[refused: a command whose working folder is outside the workspace]\n"
	refusedPinNotice   = "[refused: a program that is not the one resolved when the call was decided]\n"
	refusedStatus      = 126
	notFoundStatus     = 127
	copyDrainTimeout   = 2 * time.Second
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

// errOutside is the cause of a refused open.
var errOutside = errors.New("refused: outside the workspace")

// execution is one run of a parsed command: the interpreter, the program
// groups it started and the approved argvs they are checked against.
type execution struct {
	file     *syntax.File
	approved approvedSet
	root     *os.Root
	wsDir    string // host path of the workspace; never shown
	dir      string // host working folder
	env      []string
	path     string // PATH programs are looked up in
	out      io.Writer
	stdin    *os.File // nil: programs read /dev/null
	confine  func(*exec.Cmd, Confinement) (func(), error)
	conf     Confinement              // what every program's jail is built from
	pinned   map[string]pinnedProgram // the programs that may run
	// killCtx ends every program (SIGKILL to its group) when done.
	killCtx context.Context

	mu           sync.Mutex
	closed       bool             // no new programs
	groups       map[int]struct{} // live, unreaped process groups
	refused      []string
	refusedOpens int
	wg           sync.WaitGroup
}

// run interprets the file until it ends or ctx is done. It returns the
// shell's exit status, or an error for a failure of the interpreter itself
// (not of the command).
func (e *execution) run(ctx context.Context) (int, error) {
	var stdin io.Reader
	if e.stdin != nil {
		stdin = e.stdin
	}
	r, err := interp.New(
		interp.StdIO(stdin, e.out, e.out),
		interp.Dir(e.dir),
		interp.Env(expand.ListEnviron(e.env...)),
		interp.CallHandler(e.call),
		interp.ExecHandlers(e.execMiddleware),
		interp.OpenHandler(e.open),
		interp.ReadDirHandler2(e.readDir),
	)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errInterpreter, err)
	}
	err = r.Run(ctx, e.file)
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	if err == nil {
		return 0, nil
	}
	if st, ok := interp.IsExitStatus(err); ok {
		return int(st), nil
	}
	return 0, err
}

// finish stops new programs, kills every group still alive and waits until
// all are reaped and their output drained.
func (e *execution) finish() {
	e.mu.Lock()
	e.closed = true
	for pgid := range e.groups {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
	e.mu.Unlock()
	e.wg.Wait()
}

// forget removes a group from the live set and kills what remains of it.
// Callers hold the leader unreaped (a zombie at worst), so pgid still
// names that group.
func (e *execution) forget(pgid int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.groups, pgid)
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// signalAll sends sig to every live group. Groups are removed from the set
// before their leader is reaped, so a pgid here cannot have been reused.
func (e *execution) signalAll(sig syscall.Signal) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for pgid := range e.groups {
		_ = syscall.Kill(-pgid, sig)
	}
}

// waitIdle returns once no program group is alive, or when stop closes.
func (e *execution) waitIdle(stop <-chan struct{}) {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		e.mu.Lock()
		n := len(e.groups)
		e.mu.Unlock()
		if n == 0 {
			return
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
	}
}

// refusals returns what was refused so far.
func (e *execution) refusals() ([]string, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.refused), e.refusedOpens
}

func (e *execution) recordRefused(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.refused) < maxRefusedRecorded {
		e.refused = append(e.refused, name)
	}
}

// call sees every simple command, builtins included.
func (e *execution) call(_ context.Context, args []string) ([]string, error) {
	if guardedBuiltins[args[0]] && !e.approved.match(args) {
		return []string{refusedName, args[0]}, nil
	}
	return args, nil
}

// execMiddleware replaces the interpreter's default exec handler entirely:
// next is never called, so nothing is executed by any other path.
func (e *execution) execMiddleware(interp.ExecHandlerFunc) interp.ExecHandlerFunc {
	return e.exec
}

// exec runs one program the interpreter wants to execute, if approved.
func (e *execution) exec(ctx context.Context, args []string) error {
	hc := interp.HandlerCtx(ctx)
	if args[0] == refusedName {
		e.recordRefused(args[1])
		io.WriteString(hc.Stderr, refusedNotice)
		return interp.ExitStatus(refusedStatus)
	}
	if !e.approved.match(args) {
		e.recordRefused(e.display(args[0]))
		io.WriteString(hc.Stderr, refusedNotice)
		return interp.ExitStatus(refusedStatus)
	}
	if !e.dirInside(hc.Dir) {
		e.recordRefused(e.display(args[0]))
		io.WriteString(hc.Stderr, refusedDirNotice)
		return interp.ExitStatus(refusedStatus)
	}
	// Look up in the allowlisted PATH, never one the script assigned.
	resolved, err := interp.LookPathDir(hc.Dir, expand.ListEnviron("PATH="+e.path), args[0])
	if err != nil {
		fmt.Fprintf(hc.Stderr, "%s: command not found\n", e.display(args[0]))
		return interp.ExitStatus(notFoundStatus)
	}
	prog, ok := pinnedPath(e.pinned, args[0], resolved)
	if !ok {
		e.recordRefused(e.display(args[0]))
		io.WriteString(hc.Stderr, refusedPinNotice)
		return interp.ExitStatus(refusedStatus)
	}
	return e.start(hc, prog, args)
}

// start runs prog in its own process group and waits for it.
func (e *execution) start(hc interp.HandlerContext, prog string, args []string) error {
	cmd := exec.Command(prog)
	cmd.Args = args
	cmd.Env = execEnv(hc.Env)
	cmd.Dir = hc.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if f, ok := hc.Stdin.(*os.File); ok && f != nil {
		cmd.Stdin = f
	}
	pipes, err := wireOutput(cmd, hc.Stdout, hc.Stderr)
	if err != nil {
		return fmt.Errorf("shell: pipe: %w", err)
	}
	release := func() {}
	if e.confine != nil {
		rel, err := e.confine(cmd, e.conf)
		if err != nil {
			pipes.abort()
			// Fail closed: the whole call fails, nothing of it runs.
			return fmt.Errorf("%w: %v", errConfine, err)
		}
		if rel != nil {
			release = rel
		}
	}

	e.mu.Lock()
	if e.closed || e.killCtx.Err() != nil {
		e.mu.Unlock()
		release()
		pipes.abort()
		return interp.ExitStatus(128 + int(syscall.SIGKILL))
	}
	err = cmd.Start()
	release()
	if err != nil {
		e.mu.Unlock()
		pipes.abort()
		fmt.Fprintf(hc.Stderr, "%s: cannot execute\n", e.display(args[0]))
		return interp.ExitStatus(refusedStatus)
	}
	pgid := cmd.Process.Pid
	e.groups[pgid] = struct{}{}
	e.wg.Add(1)
	e.mu.Unlock()
	defer e.wg.Done()
	pipes.started()

	werr := e.awaitLeader(cmd, pgid)
	pipes.drain(copyDrainTimeout)

	var ee *exec.ExitError
	switch {
	case werr == nil:
		return nil
	case errors.As(werr, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return interp.ExitStatus(128 + int(ws.Signal()))
		}
		return interp.ExitStatus(ee.ExitCode())
	}
	return fmt.Errorf("shell: wait: %w", werr)
}

// display spells a program name for the output and data.refused without
// the workspace's host path (an expanded $HOME or ~): it becomes "~/…".
func (e *execution) display(name string) string {
	if rel, ok := strings.CutPrefix(name, e.wsDir+"/"); ok {
		return "~/" + rel
	}
	if name == e.wsDir {
		return "~"
	}
	return name
}

// dirInside reports whether the interpreter's folder (which cd may have
// changed) still resolves inside the workspace.
func (e *execution) dirInside(dir string) bool {
	rel, ok := wspath.HostRel(e.wsDir, dir)
	if !ok {
		return false
	}
	_, _, err := resolveDir(e.root, "", rel)
	return err == nil
}

// open confines files the shell itself opens (redirects, source) to the
// workspace through its os.Root; /dev/null is allowed.
func (e *execution) open(ctx context.Context, path string, flag int, perm os.FileMode) (io.ReadWriteCloser, error) {
	if path == os.DevNull {
		return os.OpenFile(os.DevNull, flag, perm)
	}
	hc := interp.HandlerCtx(ctx)
	abs := path
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(hc.Dir, path)
	}
	rel, ok := wspath.HostRel(e.wsDir, abs)
	if !ok {
		e.mu.Lock()
		e.refusedOpens++
		e.mu.Unlock()
		// The interpreter prints this error: "open PATH: refused: …".
		return nil, &os.PathError{Op: "open", Path: path, Err: errOutside}
	}
	f, err := e.root.OpenFile(filepath.FromSlash(rel), flag, perm)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return f, nil
}

// readDir lets globbing list folders inside the workspace only; elsewhere
// a glob matches nothing and stays literal.
func (e *execution) readDir(ctx context.Context, path string) ([]fs.DirEntry, error) {
	hc := interp.HandlerCtx(ctx)
	abs := path
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(hc.Dir, path)
	}
	rel, ok := wspath.HostRel(e.wsDir, abs)
	if !ok {
		return nil, nil
	}
	f, err := e.root.Open(filepath.FromSlash(rel))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// execEnv is the environment of an executed program: the interpreter's
// exported string variables (the allowlist plus what the script itself
// exported), minus variables that change how a program is loaded.
func execEnv(env expand.Environ) []string {
	vals := map[string]string{}
	var order []string
	env.Each(func(name string, vr expand.Variable) bool {
		if !vr.IsSet() {
			delete(vals, name)
			return true
		}
		if vr.Exported && vr.Kind == expand.String && !loaderVariable(name) {
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

func loaderVariable(name string) bool {
	return strings.HasPrefix(name, "LD_") || strings.HasPrefix(name, "DYLD_") || name == "BASH_ENV" || name == "ENV"
}

// outputPipes connects a program's stdout/stderr to writers that are not
// files (the capture), through pipes the gateway drains.
type outputPipes struct {
	writeEnds []*os.File // closed in the parent once the child has them
	readEnds  []*os.File
	done      []chan struct{}
}

// wireOutput sets cmd.Stdout and cmd.Stderr: files (pipes of a pipeline,
// redirect targets) are passed as they are; other writers get an OS pipe
// each, shared when stdout and stderr are the same writer, so that the
// child never depends on a Go goroutine of os/exec.
func wireOutput(cmd *exec.Cmd, stdout, stderr io.Writer) (*outputPipes, error) {
	p := &outputPipes{}
	wire := func(w io.Writer) (*os.File, error) {
		if w == nil {
			return nil, nil
		}
		if f, ok := w.(*os.File); ok {
			return f, nil
		}
		pr, pw, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, _ = io.Copy(w, pr)
		}()
		p.writeEnds = append(p.writeEnds, pw)
		p.readEnds = append(p.readEnds, pr)
		p.done = append(p.done, done)
		return pw, nil
	}
	out, err := wire(stdout)
	if err != nil {
		p.abort()
		return nil, err
	}
	errf := out
	if stderr != stdout {
		if errf, err = wire(stderr); err != nil {
			p.abort()
			return nil, err
		}
	}
	if out != nil {
		cmd.Stdout = out
	}
	if errf != nil {
		cmd.Stderr = errf
	}
	return p, nil
}

// started closes the parent's copies of the write ends.
func (p *outputPipes) started() {
	for _, w := range p.writeEnds {
		w.Close()
	}
	p.writeEnds = nil
}

// drain waits for the copies to reach end of file, at most d; a program
// that escaped its group may hold a pipe open, so the read ends are closed
// after that.
func (p *outputPipes) drain(limit time.Duration) {
	t := time.NewTimer(limit)
	defer t.Stop()
	for i, done := range p.done {
		select {
		case <-done:
		case <-t.C:
			for _, r := range p.readEnds[i:] {
				r.Close() // unblocks the copy
			}
			for _, rest := range p.done[i:] {
				<-rest
			}
			return
		}
		p.readEnds[i].Close()
	}
}

// abort releases the pipes of a program that never started.
func (p *outputPipes) abort() {
	p.started()
	for _, r := range p.readEnds {
		r.Close()
	}
	for _, d := range p.done {
		<-d
	}
}
