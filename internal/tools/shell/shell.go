package shell

import (
	"context"
	"log/slog"
	"os"
	"path"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/sandbox"
	"github.com/toolgate/toolgate/internal/tools"
)

// DefaultPath is the PATH every command runs with unless EnvAllowlist sets
// one explicitly ("PATH=…"). Programs are always looked up in it, never in
// a PATH the script assigned itself.
const DefaultPath = "/usr/local/bin:/usr/bin:/bin:/usr/local/go/bin"

// DefaultEnvAllowlist returns the environment a command sees when Options
// names none. A bare NAME copies the gateway's value when set; NAME=VALUE
// sets a fixed value. HOME is always the workspace folder and PATH
// DefaultPath unless given as PATH=….
func DefaultEnvAllowlist() []string {
	return []string{"PATH", "HOME", "LANG", "LC_ALL", "TERM=dumb", "TZ"}
}

// Limits are the ceilings of the shell tools. Zero fields take the
// defaults documented on each.
type Limits struct {
	DefaultTimeout    time.Duration // bash timeout_ms default; 30 s
	MaxTimeout        time.Duration // bash timeout_ms ceiling; 120 s
	MaxOutputBytes    int           // bash content cap; 64 KiB
	SessionProcesses  int           // running background processes per (tenant, session); 4
	TenantProcesses   int           // running background processes per tenant; 16
	RetainedOutput    int           // output bytes kept per background process; 1 MiB
	MaxInputBytes     int           // process-input bytes per call; 64 KiB
	GracePeriod       time.Duration // process-stop grace_ms default; 2 s
	Lifetime          time.Duration // a background process is killed after this; 1 h
	RetainExited      time.Duration // an ended process is forgotten after this; 10 min
	RetainExitedCount int           // ended processes kept per (tenant, session); 32
}

func (l Limits) withDefaults() Limits {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	defInt := func(i *int, v int) {
		if *i <= 0 {
			*i = v
		}
	}
	def(&l.DefaultTimeout, 30*time.Second)
	def(&l.MaxTimeout, 120*time.Second)
	defInt(&l.MaxOutputBytes, 64<<10)
	defInt(&l.SessionProcesses, 4)
	defInt(&l.TenantProcesses, 16)
	defInt(&l.RetainedOutput, 1<<20)
	defInt(&l.MaxInputBytes, 64<<10)
	def(&l.GracePeriod, 2*time.Second)
	def(&l.Lifetime, time.Hour)
	def(&l.RetainExited, 10*time.Minute)
	defInt(&l.RetainExitedCount, 32)
	if l.DefaultTimeout > l.MaxTimeout {
		l.DefaultTimeout = l.MaxTimeout
	}
	return l
}

// Options configure New.
type Options struct {
	// Runner runs every command: the interpreter and everything it starts,
	// in a jail built from the decision. nil withholds the command tools.
	Runner Runner
	// Withheld, when not empty, withholds every shell tool from every
	// caller (they answer "tool unavailable"): the reason, for audit, why
	// commands cannot run safely here (e.g. the kernel cannot build the
	// jail).
	Withheld string
	// EnvAllowlist is the environment of every command; nil means
	// DefaultEnvAllowlist.
	EnvAllowlist []string
	// Getenv reads the gateway's environment for bare allowlist names;
	// nil means os.Getenv. Tests substitute it.
	Getenv func(string) string
	Limits Limits
	Now    func() time.Time // nil means time.Now
	Logger *slog.Logger     // nil means slog.Default()
}

// Runner runs decided commands outside the gateway.
type Runner interface {
	// Path is where the workspace at the host folder host appears to a
	// command (sandbox.DefaultMountAt in the jail).
	Path(host string) string
	// Start runs the shell interpreter (sandbox payload
	// command.PayloadName) with spec, the command.Spec as JSON, in a jail
	// built from c; stdin nil means /dev/null, out gets stdout and stderr
	// as one stream.
	Start(c Confinement, spec []byte, stdin, out *os.File) (*sandbox.Running, error)
}

// Confinement is what the jail of one command is built from.
type Confinement struct {
	// Tenant is whose command it is: its jails share one CPU cgroup.
	Tenant string
	// Workspace is the host folder of the call's workspace.
	Workspace string
	// Programs are the absolute host paths of the approved programs of
	// the call, resolved when it was prepared.
	Programs []string
	// Limits are the call's limits, obligations applied (write paths, exec
	// paths, resource limits, network, hidden paths).
	Limits tools.Limits
	// FileSizeBytes, when positive, tightens the largest file a program
	// may write: the room the workspace's quota has left.
	FileSizeBytes int64
}

// Shell holds the process supervisor shared by bash and the process tools.
type Shell struct {
	opts   Options
	lim    Limits
	env    envTemplate
	log    *slog.Logger
	now    func() time.Time
	sup    *Supervisor
	bash   *Bash
	output *ProcessOutput
	input  *ProcessInput
	stop   *ProcessStop
}

// New returns the shell tools sharing one supervisor.
func New(opts Options) (*Shell, error) {
	s := &Shell{opts: opts, lim: opts.Limits.withDefaults(), log: opts.Logger, now: opts.Now}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	allow := opts.EnvAllowlist
	if allow == nil {
		allow = DefaultEnvAllowlist()
	}
	env, err := newEnvTemplate(allow, getenv)
	if err != nil {
		return nil, err
	}
	s.env = env
	s.sup = newSupervisor(s.lim, s.now, s.log)
	s.bash = newBash(s)
	s.output = newProcessOutput(s)
	s.input = newProcessInput(s)
	s.stop = newProcessStop(s)
	return s, nil
}

// Tools returns bash, process-output, process-input and process-stop, in
// that order.
func (s *Shell) Tools() []tools.Tool {
	return []tools.Tool{s.bash, s.output, s.input, s.stop}
}

// Supervisor returns the supervisor of background processes.
func (s *Shell) Supervisor() *Supervisor { return s.sup }

// Close kills every process tree the shell started and waits until they
// are reaped. It is idempotent; bash calls after Close fail.
func (s *Shell) Close() error { return s.sup.Close() }

// envTemplate is the allowlisted environment minus HOME, which is the
// workspace folder of each call.
type envTemplate struct {
	pairs []string // NAME=VALUE, HOME excluded
	path  string   // PATH programs are looked up in
	home  bool     // HOME is allowed
}

func newEnvTemplate(allow []string, getenv func(string) string) (envTemplate, error) {
	t := envTemplate{path: DefaultPath}
	seen := map[string]bool{}
	for _, entry := range allow {
		name, value, fixed := strings.Cut(entry, "=")
		if name == "" || strings.ContainsAny(name, " \t\n\x00") {
			return envTemplate{}, errBadAllowlist(entry)
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		switch {
		case name == "HOME":
			t.home = true
			continue
		case name == "PATH":
			if fixed {
				t.path = value
			}
			value = t.path
		case !fixed:
			v := getenv(name)
			if v == "" {
				continue
			}
			value = v
		}
		t.pairs = append(t.pairs, name+"="+value)
	}
	return t, nil
}

// build returns the environment of one call whose workspace folder (as
// the command sees it) is home. git never looks for a repository above the workspace
// (GIT_CEILING_DIRECTORIES is the workspace's parent: a workspace that is
// not a repository must not discover the gateway's own checkout around
// it) and never reads the host's /etc/gitconfig (GIT_CONFIG_NOSYSTEM).
// Both are set whatever the allowlist says.
func (t envTemplate) build(home string) []string {
	out := make([]string, 0, len(t.pairs)+3)
	for _, p := range t.pairs {
		if !strings.HasPrefix(p, "GIT_CEILING_DIRECTORIES=") && !strings.HasPrefix(p, "GIT_CONFIG_NOSYSTEM=") {
			out = append(out, p)
		}
	}
	if t.home {
		out = append(out, "HOME="+home)
	}
	return append(out,
		"GIT_CEILING_DIRECTORIES="+path.Dir(path.Clean(home)),
		"GIT_CONFIG_NOSYSTEM=1")
}

// effectiveTimeout is how long a command may run: what the call asked
// for, never more than the tool's ceiling, and ending early enough before
// ctx's deadline (which carries the policy-tightened limit) that the
// process group can be killed and the result reported.
func effectiveTimeout(ctx context.Context, asked time.Duration, lim tools.Limits) time.Duration {
	d := asked
	if lim.Timeout > 0 && lim.Timeout-reserve(lim.Timeout) < d {
		d = lim.Timeout - reserve(lim.Timeout)
	}
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left-reserve(left) < d {
			d = left - reserve(left)
		}
	}
	if d < time.Millisecond {
		d = time.Millisecond
	}
	return d
}

// reserve is the time kept back before a deadline: a tenth, at most 1 s.
func reserve(d time.Duration) time.Duration {
	r := d / 10
	if r > time.Second {
		r = time.Second
	}
	return r
}

// WithheldReason implements tools.Withheld for every shell tool.
func (t *Bash) WithheldReason() string { return t.sh.opts.Withheld }

// WithheldReason implements tools.Withheld.
func (t *ProcessOutput) WithheldReason() string { return t.sh.opts.Withheld }

// WithheldReason implements tools.Withheld.
func (t *ProcessInput) WithheldReason() string { return t.sh.opts.Withheld }

// WithheldReason implements tools.Withheld.
func (t *ProcessStop) WithheldReason() string { return t.sh.opts.Withheld }
