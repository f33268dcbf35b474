// Package invoke runs prepared calls, and only prepared calls. It applies
// limits (obligations may only tighten them), a per-call timeout, a
// concurrency limit, panic recovery, result caps and error redaction: what
// the model sees is the tool's result, its explicit model-facing error, or
// exactly "the tool failed".
//
// Two concurrency limits apply: at most MaxConcurrent calls of any tool
// run at once (the global cap), and at most TenantCommands command-tool
// calls (action ActionCommand: bash, foreground or a background start) of
// one tenant, so that one tenant's commands cannot take every global slot.
// A call takes its tenant's command slot before a global one: a call
// waiting for its own tenant never holds a slot another tenant could use.
package invoke

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
	"time"
	"unicode/utf8"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/decision"
	"github.com/toolgate/toolgate/internal/prepare"
	"github.com/toolgate/toolgate/internal/tools"
)

// ToolFailed is the model-facing text of every failure that is not an
// explicit model-facing error.
const ToolFailed = "the tool failed"

// Options configure an Invoker.
type Options struct {
	DefaultTimeout time.Duration // used when a tool sets none; default 30s
	MaxOutputBytes int           // used when a tool sets none; default 64 KiB
	MaxConcurrent  int           // calls running at once, default 64
	// TenantCommands bounds the command-tool calls of one tenant running
	// at once, under MaxConcurrent; default DefaultTenantCommands.
	TenantCommands int
	Logger         *slog.Logger
}

// ActionCommand is the action of the tools that run programs: their calls
// count against Options.TenantCommands.
const ActionCommand = "command.execute"

// Defaults of Options.
const (
	DefaultMaxConcurrent  = 64
	DefaultTenantCommands = 8
	// DefaultTimeout bounds a call whose tool and policy set no timeout.
	DefaultTimeout = 30 * time.Second
	// DefaultMaxOutputBytes bounds the model-facing content of a result.
	DefaultMaxOutputBytes = 64 << 10
)

// IsCommand reports whether calls of spec run programs (and so take a
// command slot of their tenant).
func IsCommand(spec *tools.Spec) bool { return spec.Action == ActionCommand }

// Invoker runs prepared calls.
type Invoker struct {
	opts     Options
	sem      chan struct{}
	waiting  atomic.Int64 // calls blocked on sem, for tests
	commands *TenantSlots
	log      *slog.Logger
}

// New returns an Invoker.
func New(opts Options) *Invoker {
	if opts.DefaultTimeout <= 0 {
		opts.DefaultTimeout = DefaultTimeout
	}
	if opts.MaxOutputBytes <= 0 {
		opts.MaxOutputBytes = DefaultMaxOutputBytes
	}
	if opts.MaxConcurrent <= 0 {
		opts.MaxConcurrent = DefaultMaxConcurrent
	}
	if opts.TenantCommands <= 0 {
		opts.TenantCommands = DefaultTenantCommands
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Invoker{opts: opts, sem: make(chan struct{}, opts.MaxConcurrent),
		commands: NewTenantSlots(opts.TenantCommands), log: opts.Logger}
}

// CommandsWaiting is how many command-tool calls wait for a slot of their
// tenant right now.
func (iv *Invoker) CommandsWaiting() int64 { return iv.commands.Waiting() }

// Waiting is how many calls wait for a global slot (MaxConcurrent) right
// now.
func (iv *Invoker) Waiting() int64 { return iv.waiting.Load() }

// acquire takes a global slot, waiting (counted in Waiting) while every
// slot is taken, until ctx ends.
func (iv *Invoker) acquire(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case iv.sem <- struct{}{}:
		return nil
	default:
	}
	iv.waiting.Add(1)
	defer iv.waiting.Add(-1)
	select {
	case iv.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Outcome is the shaped result of one invocation.
type Outcome struct {
	Outcome   apiv1.Outcome // apiv1.OutcomeOK or apiv1.OutcomeToolError
	Content   string        // model-facing
	IsError   bool
	Data      map[string]any
	Bytes     int
	Truncated bool
	// Permanent marks a tool_error the tool declared permanent
	// (tools.ErrPermanent): the API ends the run with a non-200 status.
	Permanent bool
	// Err is the internal cause of a tool_error, for logs and audit only.
	Err      error
	Duration time.Duration
}

// Limits computes the effective limits of a call: the tool's own, or the
// gateway defaults, tightened (never loosened) by obligations.
func (iv *Invoker) Limits(spec *tools.Spec, ob decision.Obligations) tools.Limits {
	lim := spec.Limits
	if lim.Timeout <= 0 {
		lim.Timeout = iv.opts.DefaultTimeout
	}
	if lim.MaxOutputBytes <= 0 {
		lim.MaxOutputBytes = iv.opts.MaxOutputBytes
	}
	if ob.TimeoutMS > 0 {
		if d := time.Duration(ob.TimeoutMS) * time.Millisecond; d < lim.Timeout {
			lim.Timeout = d
		}
	}
	if ob.MaxOutputBytes > 0 && ob.MaxOutputBytes < int64(lim.MaxOutputBytes) {
		lim.MaxOutputBytes = int(ob.MaxOutputBytes)
	}
	lim.ExcludePaths = append(append([]string(nil), lim.ExcludePaths...), ob.ExcludePaths...)
	if ob.WritePaths != nil {
		lim.WritePaths = append([]string{}, ob.WritePaths...)
	}
	lim.ExecPaths = append([]string(nil), ob.ExecPaths...)
	lim.MemoryBytes, lim.MaxProcesses, lim.Network = ob.MemoryBytes, ob.MaxProcesses, ob.Network
	return lim
}

// Invoke runs p under the limits obligations allow.
func (iv *Invoker) Invoke(ctx context.Context, p *prepare.Prepared, ob decision.Obligations) Outcome {
	start := time.Now()
	lim := iv.Limits(p.Spec(), ob)
	ctx, cancel := context.WithTimeout(ctx, lim.Timeout)
	defer cancel()

	// A call that gets no slot within its time limit fails closed without
	// running: the model sees "the tool failed", like any other timeout.
	if IsCommand(p.Spec()) {
		release, err := iv.commands.Acquire(ctx, p.Tenant())
		if err != nil {
			return iv.failed(start, fmt.Errorf("waiting for a command slot of tenant %q: %w", p.Tenant(), err))
		}
		defer release()
	}
	if err := iv.acquire(ctx); err != nil {
		return iv.failed(start, fmt.Errorf("waiting for a concurrency slot: %w", err))
	}
	defer func() { <-iv.sem }()

	res, err := iv.run(ctx, p, lim)
	if err == nil && ctx.Err() != nil {
		// A tool that ignored its deadline must not be reported as a
		// success after the limit.
		err = fmt.Errorf("tool exceeded its time limit: %w", ctx.Err())
	}
	if err != nil {
		var me *tools.ModelError
		if errors.As(err, &me) {
			return Outcome{Outcome: apiv1.OutcomeToolError, Content: me.Message, IsError: true, Err: err, Duration: time.Since(start)}
		}
		out := iv.failed(start, err)
		out.Permanent = errors.Is(err, tools.ErrPermanent)
		return out
	}
	content, cut := capContent(res.Content, lim.MaxOutputBytes)
	return Outcome{
		Outcome:   apiv1.OutcomeOK,
		Content:   content,
		Data:      res.Data,
		Bytes:     res.Bytes,
		Truncated: res.Truncated || cut,
		Duration:  time.Since(start),
	}
}

func (iv *Invoker) failed(start time.Time, err error) Outcome {
	return Outcome{Outcome: apiv1.OutcomeToolError, Content: ToolFailed, IsError: true, Err: err, Duration: time.Since(start)}
}

// run calls the tool, turning a panic into an error so one broken tool
// cannot take the gateway down or leak a stack to the model.
func (iv *Invoker) run(ctx context.Context, p *prepare.Prepared, lim tools.Limits) (res tools.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			iv.log.Error("tool panicked", "tool", p.ToolName(), "call_id", p.CallID(), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = fmt.Errorf("tool panicked: %v", r)
		}
	}()
	return p.Run(ctx, lim)
}

// truncationNotice ends content the gateway had to cut.
const truncationNotice = "\n[truncated: output exceeded the limit]"

// capContent enforces the byte cap on model-facing content even when a tool
// did not, cutting on a UTF-8 boundary.
func capContent(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	keep := max - len(truncationNotice)
	if keep < 0 {
		keep = 0
	}
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + truncationNotice, true
}
