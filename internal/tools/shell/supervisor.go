package shell

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process states.
const (
	StateRunning = "running"
	StateExited  = "exited"
	StateKilled  = "killed"
)

// Exit codes of a stopped process, as a shell reports a signal death.
const (
	terminatedStatus = 128 + int(syscall.SIGTERM)
	killedStatus     = 128 + int(syscall.SIGKILL)
	failedStatus     = 126
)

// failedNotice ends the output of a background command the gateway could
// not run (e.g. confinement failed).
const failedNotice = "[failed: the command could not run]\n"

// Supervisor owns the background processes of every (tenant, session) and
// the kill switch of every foreground command.
type Supervisor struct {
	lim  Limits
	now  func() time.Time
	log  *slog.Logger
	base context.Context
	kill context.CancelFunc

	mu     sync.Mutex
	closed bool
	procs  map[string]*Process
	wg     sync.WaitGroup
}

func newSupervisor(lim Limits, now func() time.Time, log *slog.Logger) *Supervisor {
	base, kill := context.WithCancel(context.Background())
	return &Supervisor{lim: lim, now: now, log: log, base: base, kill: kill, procs: map[string]*Process{}}
}

// Process is one background command: one jail.
type Process struct {
	id       string
	tenant   string
	session  string
	owner    string // the principal that started it
	command  string
	segments [][]string
	started  time.Time
	out      *outputRing
	job      *job
	done     chan struct{}

	killAll context.CancelFunc // ends the jail now

	inMu        sync.Mutex
	stdin       *os.File // write end; nil once closed
	stdinClosed bool

	mu            sync.Mutex
	state         string
	exitCode      int
	ended         time.Time
	stopRequested bool
	escalated     bool
}

// procStatus is a point-in-time view of a process.
type procStatus struct {
	ID       string
	Status   string
	ExitCode *int // nil while running
}

// snapshot returns the process's status.
func (p *Process) snapshot() procStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := procStatus{ID: p.id, Status: p.state}
	if p.state != StateRunning {
		c := p.exitCode
		s.ExitCode = &c
	}
	return s
}

// track registers a foreground command so that Close kills it: stop is
// called on Close. The returned release must be called when it ends.
func (s *Supervisor) track(stop context.CancelFunc) (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	s.wg.Add(1)
	unregister := context.AfterFunc(s.base, stop)
	return func() {
		unregister()
		s.wg.Done()
	}, nil
}

// start launches a background job of a for (tenant, session), started by
// principal owner.
func (s *Supervisor) start(tenant, session, owner string, a *bashArtifact, j *job) (string, error) {
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		stdinR.Close()
		stdinW.Close()
		return "", errClosed
	}
	s.pruneLocked()
	perSession, perTenant := 0, 0
	for _, p := range s.procs {
		if p.tenant != tenant || !p.running() {
			continue
		}
		perTenant++
		if p.session == session {
			perSession++
		}
	}
	if perSession >= s.lim.SessionProcesses || perTenant >= s.lim.TenantProcesses {
		s.mu.Unlock()
		stdinR.Close()
		stdinW.Close()
		return "", errQuota
	}
	id := s.newIDLocked()
	killCtx, killAll := context.WithTimeout(s.base, s.lim.Lifetime)
	p := &Process{
		id: id, tenant: tenant, session: session, owner: owner, command: a.command,
		segments: a.segments, started: s.now(),
		out:     newOutputRing(s.lim.RetainedOutput),
		job:     j,
		done:    make(chan struct{}),
		killAll: killAll,
		stdin:   stdinW, state: StateRunning,
	}
	err = j.start(stdinR, p.out)
	stdinR.Close()
	if err != nil {
		s.mu.Unlock()
		killAll()
		stdinW.Close()
		return "", err
	}
	s.procs[id] = p
	s.wg.Add(1)
	s.mu.Unlock()

	go s.run(p, killCtx)
	return id, nil
}

// run drives one background process to its end: the jail ending on its
// own, or killed at the end of its lifetime, on escalation of a stop, or
// when the supervisor closes.
func (s *Supervisor) run(p *Process, killCtx context.Context) {
	defer s.wg.Done()
	ended := p.job.wait(killCtx)
	ex, _, err := p.job.result()
	code := ex.Code
	if err != nil {
		s.log.Error("background command failed", "process_id", p.id, "tenant", p.tenant, "err", err)
		p.out.Write([]byte(failedNotice))
		code = failedStatus
	} else if ex.OOM {
		p.out.Write([]byte(memoryNotice))
	}
	p.inMu.Lock()
	if p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
	}
	p.inMu.Unlock()
	p.out.close()

	p.mu.Lock()
	switch {
	case p.stopRequested || ended != nil:
		p.state = StateKilled
		p.exitCode = terminatedStatus
		if p.escalated || ended != nil {
			p.exitCode = killedStatus
		}
	default:
		p.state = StateExited
		p.exitCode = code
	}
	p.ended = s.now()
	p.mu.Unlock()
	p.killAll()
	close(p.done)
}

func (p *Process) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state == StateRunning
}

func (p *Process) stopping() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopRequested
}

// stop asks every process of the jail to end (SIGTERM from the jail's
// init), ends the jail after grace (or when ctx ends first), and waits
// until it has.
func (p *Process) stop(ctx context.Context, grace time.Duration) {
	p.mu.Lock()
	if p.state != StateRunning {
		p.mu.Unlock()
		return
	}
	p.stopRequested = true
	p.mu.Unlock()

	p.job.run.Stop()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return
	case <-t.C:
	case <-ctx.Done():
	}
	p.mu.Lock()
	p.escalated = true
	p.mu.Unlock()
	p.killAll()
	<-p.done
}

// lookup returns the process id of (tenant, session). A process of another
// session or tenant is reported exactly like a missing one.
func (s *Supervisor) lookup(tenant, session, id string) (*Process, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pruneLocked()
	p := s.procs[id]
	if p == nil || p.tenant != tenant || p.session != session {
		return nil, false
	}
	return p, true
}

// pruneLocked forgets ended processes past their retention, and the oldest
// ended ones past the per-session count.
func (s *Supervisor) pruneLocked() {
	now := s.now()
	type ended struct {
		id string
		at time.Time
	}
	bySession := map[[2]string][]ended{}
	for id, p := range s.procs {
		p.mu.Lock()
		st, at := p.state, p.ended
		p.mu.Unlock()
		if st == StateRunning {
			continue
		}
		if now.Sub(at) > s.lim.RetainExited {
			delete(s.procs, id)
			continue
		}
		k := [2]string{p.tenant, p.session}
		bySession[k] = append(bySession[k], ended{id, at})
	}
	for _, es := range bySession {
		if len(es) <= s.lim.RetainExitedCount {
			continue
		}
		slices.SortFunc(es, func(a, b ended) int { return a.at.Compare(b.at) })
		for _, e := range es[:len(es)-s.lim.RetainExitedCount] {
			delete(s.procs, e.id)
		}
	}
}

// idEncoding renders process ids: lower-case base32 without padding.
var idEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// newIDLocked returns an unused opaque id, "proc_" + 16 base32 characters.
func (s *Supervisor) newIDLocked() string {
	for {
		var b [10]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
		id := "proc_" + strings.ToLower(idEncoding.EncodeToString(b[:]))
		if _, dup := s.procs[id]; !dup {
			return id
		}
	}
}

// Close kills every process tree, background and foreground, and waits
// until all are reaped. It is idempotent.
func (s *Supervisor) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.kill()
	s.wg.Wait()
	return nil
}
