// Package pipeline is the request path of a tool call, one straight line:
// availability → prepare → decide → audit(decision) → invoke →
// audit(result). Each stage hands the next an immutable value. It knows no
// HTTP; the application services of internal/service wrap it and map its
// results and errors (service.Error) for every front door (REST, MCP).
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/open-policy-agent/opa/v1/ast"
	"go.opentelemetry.io/otel/trace"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/approval"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/decision"
	"github.com/toolgate/toolgate/internal/idempotency"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/invoke"
	"github.com/toolgate/toolgate/internal/metrics"
	"github.com/toolgate/toolgate/internal/prepare"
	"github.com/toolgate/toolgate/internal/ratelimit"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/internal/tools"
)

// Model-facing contract strings.
const (
	TextUnavailable      = "tool unavailable"
	TextDenied           = "permission denied"
	TextApprovalRequired = "approval required"
	TextCanceled         = "canceled"
	// EffectsNotUndone is what a call canceled while it ran says about its
	// effects (data.effects): cancellation undoes nothing.
	EffectsNotUndone = "the call had started; any effect it had is not undone"
	// ReasonCanceled is the audit reason of a canceled call.
	ReasonCanceled = "canceled: a sibling call in the batch failed permanently"
)

// Errors that make the gateway fail closed: nothing ran.
var (
	// ErrPolicy: no policy loaded, evaluation error or malformed decision.
	ErrPolicy = errors.New("policy unavailable")
	// ErrAudit: the decision event could not be committed.
	ErrAudit = errors.New("audit store unavailable")
	// ErrOverloaded: the audit queue is full.
	ErrOverloaded = errors.New("audit queue full")
)

// Options wire a Pipeline.
type Options struct {
	Registry *tools.Registry
	Envs     map[string]*tools.Env // by tenant
	// Engine is the enforced policy (Engine of a *decision.Engine).
	Engine   Policy
	Preparer *prepare.Preparer
	Invoker  *invoke.Invoker
	// Audit is the audit log (an *audit.Log).
	Audit   AuditLog
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	NewID   func() string
	Now     func() time.Time
	// TenantConcurrency bounds how many calls of one tenant's batches run
	// at once (default DefaultTenantConcurrency).
	TenantConcurrency int
	// Approvals keeps calls held for a human and ask-user questions; nil
	// answers approval_required without holding anything. It must be the
	// repository of the database Audit's store writes to: a held call's
	// approval and an ask-user question are written in the transaction of
	// the event that announces them (audit.Log.AppendWith).
	Approvals approval.Store
	// ApprovalTTL is how long a held call waits; default 1h. A policy
	// obligation (approval_ttl_ms) may shorten it.
	ApprovalTTL time.Duration
	// Shadow, when set, decides every authorization a second time with
	// another policy, for the audit log and metrics only.
	Shadow *Shadow
	// QuestionTTL is how long an ask-user question waits for its answer;
	// default 1h. The approval_ttl_ms obligation may shorten it too.
	QuestionTTL time.Duration
	// PollRecheck bounds how long a long-polling caller waits between
	// reads, so that a change made through another replica (which cannot
	// wake it) is seen; default 5s.
	PollRecheck time.Duration
	// TracerProvider records a span per stage under the request's span
	// (and a span per call of a batch); nil records none (trace.go).
	TracerProvider trace.TracerProvider
	// Keys keeps the call_ids callers chose as idempotency keys (see
	// claim); nil turns that off: every request decides and runs. Like
	// Approvals it is a repository of the audit database.
	Keys idempotency.Store
	// KeyTTL is how long a key is kept after its response was recorded
	// (default DefaultKeyTTL); KeyLease how long a key may stay reserved
	// without one (default DefaultKeyLease); KeyPoll how often a waiting
	// retry re-reads a key (default DefaultKeyPoll).
	KeyTTL, KeyLease, KeyPoll time.Duration
	// Limiter counts the buckets of the rate_limit obligation (nil: a
	// ratelimit.Memory of this process).
	Limiter ratelimit.Limiter
	// MaxPending bounds a tenant's pending held calls and questions
	// (default DefaultMaxPending); MaxTenantPolls its long polls waiting
	// at once in this process (default DefaultMaxTenantPolls).
	MaxPending     int
	MaxTenantPolls int
}

// DefaultTenantConcurrency is the default of Options.TenantConcurrency.
const DefaultTenantConcurrency = 8

// DefaultApprovalTTL and DefaultQuestionTTL are the defaults of
// Options.ApprovalTTL and Options.QuestionTTL.
const (
	DefaultApprovalTTL = time.Hour
	DefaultQuestionTTL = time.Hour
)

// Pipeline runs tool calls and decisions.
type Pipeline struct {
	o      Options
	calls  waiters             // long-polling callers, by tenant and call id
	slots  *invoke.TenantSlots // batch calls running, per tenant
	tracer trace.Tracer        // nil when Options.TracerProvider is
	// keyWaits wakes retries waiting for the first request with their
	// call_id, by tenant and call id.
	keyWaits waiters
	life     context.Context // ends at Close
	stop     context.CancelFunc
	// Idempotency key writes retried in the background; Close waits for
	// them. retryMu orders a retry's start with Close.
	retryMu sync.Mutex
	closed  bool
	retries sync.WaitGroup
	polls   tenantCounter // long polls waiting, per tenant
	// pending serializes, per tenant, the approvals.max_pending check
	// with the commit of the held call or question it admits.
	pending tenantLocks
}

// New returns a Pipeline.
func New(o Options) *Pipeline {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.NewID == nil {
		o.NewID = func() string { return uuid.Must(uuid.NewV7()).String() }
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New(nil)
	}
	if o.TenantConcurrency <= 0 {
		o.TenantConcurrency = DefaultTenantConcurrency
	}
	if o.ApprovalTTL <= 0 {
		o.ApprovalTTL = DefaultApprovalTTL
	}
	if o.QuestionTTL <= 0 {
		o.QuestionTTL = DefaultQuestionTTL
	}
	if o.PollRecheck <= 0 {
		o.PollRecheck = 5 * time.Second
	}
	if o.KeyTTL <= 0 {
		o.KeyTTL = DefaultKeyTTL
	}
	if o.KeyLease <= 0 {
		o.KeyLease = DefaultKeyLease
	}
	if o.KeyPoll <= 0 {
		o.KeyPoll = DefaultKeyPoll
	}
	if o.Limiter == nil {
		o.Limiter = ratelimit.NewMemory(o.Now)
	}
	if o.MaxPending <= 0 {
		o.MaxPending = DefaultMaxPending
	}
	if o.MaxTenantPolls <= 0 {
		o.MaxTenantPolls = DefaultMaxTenantPolls
	}
	life, stop := context.WithCancel(context.Background())
	return &Pipeline{o: o, slots: invoke.NewTenantSlots(o.TenantConcurrency), life: life, stop: stop,
		polls:  tenantCounter{max: o.MaxTenantPolls},
		tracer: telemetry.Tracer(o.TracerProvider, "github.com/toolgate/toolgate/internal/pipeline")}
}

// Request is one call as the API received it. Identity is verified; the
// arguments are raw bytes that only prepare decodes.
type Request struct {
	Identity  *identity.Identity
	Tool      string
	Arguments []byte
	SessionID string
	// CallID is optional (generated when empty); one the caller chose is
	// an idempotency key when Options.Keys is set.
	CallID string
	// Via names the front door when it is not REST ("mcp"), and
	// MCPRequestID the JSON-RPC id of the MCP request; both are recorded
	// on the call's audit events (audit.Event.Via, MCPRequestID) and
	// change nothing else.
	Via          string
	MCPRequestID string
}

// Response is a call's or a decision's result. For decisions Outcome is a
// decision outcome; for calls a call outcome.
type Response struct {
	CallID        string
	DecisionID    string
	Outcome       apiv1.Outcome
	Content       string
	IsError       bool
	Data          map[string]any
	RequestDigest string
	// Permanent: the tool ran and declared a permanent failure (outcome
	// tool_error); the API ends the run with a non-200 status.
	Permanent bool
	// RetryAfter is when a rate-limited call (outcome rate_limited) may
	// be tried again.
	RetryAfter time.Duration
}

// Spec lists the tools the availability policy offers id, in declaration
// order.
func (p *Pipeline) Tools(ctx context.Context, id *identity.Identity, sessionID string) ([]*tools.Spec, error) {
	rev, err := p.revision()
	if err != nil {
		return nil, err
	}
	var out []*tools.Spec
	for _, t := range p.o.Registry.All() {
		g, err := p.admit(ctx, rev, id, sessionID, t.Spec().Name)
		if err != nil {
			return nil, err
		}
		if !g.offered {
			continue
		}
		if g.schema != "" {
			// A chooser publishes exactly the schema its calls are held to.
			sp := *g.spec
			sp.InputSchema = g.schema
			out = append(out, &sp)
			continue
		}
		out = append(out, g.spec)
	}
	return out, nil
}

// Call decides a call and, when allowed, runs it.
func (p *Pipeline) Call(ctx context.Context, req Request) (Response, error) {
	return p.handle(ctx, req, true)
}

// Decide prepares, decides and audits a call without running it (PDP mode).
func (p *Pipeline) Decide(ctx context.Context, req Request) (Response, error) {
	return p.handle(ctx, req, false)
}

// call is the state of one request as it moves down the pipeline.
type call struct {
	req        Request
	run        bool
	rev        Revision
	callID     string
	decisionID string
	spec       *tools.Spec
	prepared   *prepare.Prepared
	durations  map[string]int64
	decided    bool           // its decision event is committed
	input      map[string]any // the masked document of that event
	canceled   func() bool    // batch calls: whether a sibling failed permanently
	span       trace.Span     // the request's span, or the call's own in a batch
	// keyLease is set while it holds its call_id's idempotency key: when
	// the key's lease ends.
	keyLease time.Time
}

func (p *Pipeline) handle(ctx context.Context, req Request, run bool) (Response, error) {
	mode := "decision"
	if run {
		mode = "call"
	}
	c := &call{req: req, run: run, callID: req.CallID, decisionID: p.o.NewID(), durations: map[string]int64{},
		span: trace.SpanFromContext(ctx)}
	if c.callID == "" {
		c.callID = p.o.NewID()
	}
	// A retry answers the first request's response; nothing runs again.
	resp, replayed, err := p.claim(ctx, c)
	if !replayed && err == nil {
		resp, err = p.handleCall(ctx, c)
		p.settle(ctx, c, resp, err)
	}
	c.noteSpan(resp, err)
	if err != nil {
		if !IsKeyError(err) {
			p.o.Metrics.FailClosed.WithLabelValues(causeOf(err)).Inc()
		}
		return Response{}, err
	}
	if !replayed {
		p.o.Metrics.Calls.WithLabelValues(mode, c.toolLabel(), string(resp.Outcome)).Inc()
	}
	return resp, nil
}

// toolLabel is the call's tool for metrics: only configured tools have a
// spec, so the label set stays bounded whatever names callers send.
func (c *call) toolLabel() string {
	if c.spec == nil {
		return metrics.ToolLabel("", false)
	}
	return metrics.ToolLabel(c.spec.Name, true)
}

func (p *Pipeline) handleCall(ctx context.Context, c *call) (Response, error) {
	rev, err := p.revision()
	if err != nil {
		return Response{}, p.policyFailed(ctx, c, audit.PhaseDecision, err, p.availabilityInput(c))
	}
	c.rev = rev

	// Availability, before any argument is decoded.
	t0 := time.Now()
	g, err := p.admit(ctx, rev, c.req.Identity, c.req.SessionID, c.req.Tool)
	p.stage("availability", c, t0)
	if err != nil {
		return Response{}, p.policyFailed(ctx, c, audit.PhaseDecision, err, p.availabilityInput(c))
	}
	resp, a, err := p.authorize(ctx, c, g)
	if err != nil || a == nil {
		return resp, err
	}
	return p.execute(ctx, c, a), nil
}

// gate is what availability decided about one tool name for one caller:
// shared by every call of a batch that names the tool.
type gate struct {
	tool    tools.Tool
	spec    *tools.Spec
	base    *tools.Env
	offered bool
	reason  string // audit reason when not offered
	// refused: the availability policy answered false (the audit event
	// records that result; an unknown or withheld tool has none).
	refused bool
	schema  string // a chooser's caller-specific schema
}

// admit evaluates availability for a tool name. An unknown tool and a
// hidden tool look the same to the caller; only the audit reason differs.
func (p *Pipeline) admit(ctx context.Context, rev Revision, id *identity.Identity, sessionID, name string) (*gate, error) {
	tool, known := p.o.Registry.Lookup(name)
	base := p.o.Envs[id.Tenant]
	if !known || base == nil {
		return &gate{reason: "unknown tool"}, nil
	}
	g := &gate{tool: tool, spec: tool.Spec(), base: base}
	if w, ok := tool.(tools.Withheld); ok {
		if reason := w.WithheldReason(); reason != "" {
			g.reason = reason
			return g, nil
		}
	}
	ok, err := p.available(ctx, rev, id, sessionID, g.spec, nil)
	if err != nil {
		return nil, err
	}
	if !ok {
		g.reason, g.refused = "availability policy did not offer the tool", true
		return g, nil
	}
	if ch, isChooser := tool.(tools.Chooser); isChooser {
		offered, err := p.offeredChoices(ctx, rev, id, sessionID, ch, base)
		if err != nil {
			return nil, err
		}
		if len(offered) == 0 {
			g.reason = "availability policy offered none of the tool's choices"
			return g, nil
		}
		g.schema = ch.SchemaFor(offered)
	}
	g.offered = true
	return g, nil
}

// offeredChoices are the values of a chooser that availability offers the
// caller, each judged with input.choice.
func (p *Pipeline) offeredChoices(ctx context.Context, rev Revision, id *identity.Identity, sessionID string, ch tools.Chooser, env *tools.Env) ([]tools.Choice, error) {
	all, err := ch.Choices(env)
	if err != nil {
		return nil, fmt.Errorf("%w: choices of %s: %v", errInternal, ch.Spec().Name, err)
	}
	var out []tools.Choice
	for _, choice := range all {
		ok, err := p.available(ctx, rev, id, sessionID, ch.Spec(), choice.Policy)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, choice)
		}
	}
	return out, nil
}

// authorized is a call whose allow decision is durable: it may run.
type authorized struct {
	prepared *prepare.Prepared
	dec      decision.Decision
	input    map[string]any // the masked document of the decision event
}

// authorize prepares, decides and audits one admitted call. It returns the
// final response of a call that stops here, or the authorized call when it
// may run (in PDP mode the response says allow and nothing is returned).
func (p *Pipeline) authorize(ctx context.Context, c *call, g *gate) (Response, *authorized, error) {
	resp, final, err := p.prepareCall(ctx, c, g)
	if err != nil || final {
		return resp, nil, err
	}
	return p.decide(ctx, c)
}

// prepareCall prepares an admitted call into c.prepared. A call that stops
// here (unavailable, invalid arguments) is audited and final. Preparing
// has no effect, so a batch may prepare a call again.
func (p *Pipeline) prepareCall(ctx context.Context, c *call, g *gate) (resp Response, final bool, err error) {
	id := c.req.Identity
	c.spec = g.spec
	if !g.offered {
		var result any
		if g.refused {
			result = false // availability's result, as policy returned it
		}
		resp, err := p.refuse(ctx, c, apiv1.OutcomeUnavailable, []string{g.reason}, nil, result)
		return resp, true, err
	}

	// Prepare: the one strict decode, schema, normalization, digest. The
	// environment is the tenant's, narrowed to the caller's session.
	env := *g.base
	env.SessionID = c.req.SessionID
	env.Principal = id.Principal
	t0 := time.Now()
	prep, err := p.o.Preparer.Prepare(ctx, prepare.Call{
		Identity: id, SessionID: c.req.SessionID, CallID: c.callID,
		Tool: g.tool, Env: &env, RawArgs: c.req.Arguments, Schema: g.schema,
	})
	p.stage("prepare", c, t0)
	if err != nil {
		var ie *prepare.InvalidArgumentsError
		if errors.As(err, &ie) {
			c.prepared = nil
			resp, err := p.refuse(ctx, c, apiv1.OutcomeInvalidArguments, []string{ie.Error()}, ie, nil)
			return resp, true, err
		}
		return Response{}, false, fmt.Errorf("%w: %v", errInternal, err)
	}
	c.prepared = prep
	return Response{}, false, nil
}

// decide decides a prepared call and audits the decision: on exactly the
// document whose digest is audited and whose artifact runs.
func (p *Pipeline) decide(ctx context.Context, c *call) (Response, *authorized, error) {
	id, prep := c.req.Identity, c.prepared
	t0 := time.Now()
	shadow := p.o.Shadow.start(ctx, prep.PolicyInput)
	key, in := decision.WithCacheKey(prep.PolicyKey()), decision.WithInputFunc(prep.PolicyInput)
	dec, err := c.rev.Decide(ctx, nil, key, in)
	if err != nil {
		p.stage("decide", c, t0)
		p.o.Logger.Error("authorization failed closed", "tenant", id.Tenant, "tool", c.spec.Name, "call_id", c.callID, "err", err)
		// The failed decision is audited on the document masked as the
		// policy masks it, or, when the mask fails too, on none.
		var input map[string]any
		if mask, merr := c.rev.Mask(ctx, nil, key, in); merr == nil {
			input = audit.Mask(prep.Document(), mask)
		}
		return Response{}, nil, p.policyFailed(ctx, c, audit.PhaseDecision, err, input)
	}
	mask, err := c.rev.Mask(ctx, nil, key, in)
	p.stage("decide", c, t0)
	if err != nil {
		p.o.Logger.Error("audit mask failed closed", "tenant", id.Tenant, "tool", c.spec.Name, "call_id", c.callID, "err", err)
		return Response{}, nil, p.policyFailed(ctx, c, audit.PhaseDecision, err, nil)
	}

	outcome := apiv1.OutcomeAllow
	switch {
	case !dec.Allow:
		outcome = apiv1.OutcomeDenied
	case dec.ApprovalRequired:
		outcome = apiv1.OutcomeApprovalRequired
	}
	h := p.holdFor(c, outcome, dec)
	if h != nil {
		defer p.pending.lock(id.Tenant)() // until the held call is committed
	}
	reasons := dec.Reasons
	// Limits refuse before the decision event: a refused call is audited
	// as rate_limited, holds nothing and runs nothing.
	limited, retry, err := p.limit(ctx, c, outcome, dec, h != nil)
	if err != nil {
		return Response{}, nil, err
	}
	if limited != "" {
		outcome, h = apiv1.OutcomeRateLimited, nil
		reasons = append([]string{limited}, dec.Reasons...)
	}
	// A concealed denial is answered as the tool answers an unknown
	// target; the event records the denial, and that it was concealed.
	var concealed *prepare.InvalidArgumentsError
	if outcome == apiv1.OutcomeDenied && dec.Conceal {
		concealed = prep.Concealed()
	}
	ev := p.event(c, audit.PhaseDecision, outcome, reasons)
	ev.Input = audit.Mask(prep.Document(), mask)
	ev.Obligations = dec.Obligations.Raw
	ev.Decision = dec.Raw
	ev.Concealed = concealed != nil
	ev.Shadow = p.o.Shadow.compare(shadow, dec)
	var held any // the approval commits with its decision event, or neither does
	if h != nil {
		ev.Approval = h.info()
		held = p.heldApproval(c, h, ev, dec)
	}
	if err := p.append(ctx, c, ev, held); err != nil {
		return Response{}, nil, err
	}
	c.decided, c.input = true, ev.Input

	if concealed != nil {
		// Byte for byte what refuse answers for arguments naming an
		// unknown target: no digest, the tool's own feedback.
		return Response{CallID: c.callID, DecisionID: c.decisionID, Outcome: apiv1.OutcomeInvalidArguments,
			Content: concealed.Error(), IsError: true}, nil, nil
	}
	resp := Response{CallID: c.callID, DecisionID: c.decisionID, RequestDigest: prep.Digest()}
	switch outcome {
	case apiv1.OutcomeRateLimited:
		return rateLimited(resp, retry), nil, nil
	case apiv1.OutcomeDenied:
		resp.Outcome, resp.IsError = apiv1.OutcomeDenied, true
		resp.Content = TextDenied
		if dec.Message != "" {
			resp.Content = dec.Message
		}
		return resp, nil, nil
	case apiv1.OutcomeApprovalRequired:
		resp.Outcome, resp.Content, resp.IsError = apiv1.OutcomeApprovalRequired, TextApprovalRequired, true
		if h != nil {
			resp.Data = h.data()
		}
		return resp, nil, nil
	}
	if !c.run {
		resp.Outcome = apiv1.OutcomeAllow
		return resp, nil, nil
	}
	return resp, &authorized{prepared: prep, dec: dec, input: ev.Input}, nil
}

// execute runs an authorized call and audits its result. The decision
// event is durable: the tool may run now.
func (p *Pipeline) execute(ctx context.Context, c *call, a *authorized) Response {
	id := c.req.Identity
	ictx, span := p.startSpan(ctx, c, "invoke")
	out := p.o.Invoker.Invoke(ictx, a.prepared, a.dec.Obligations)
	endInvoke(span, out)
	var question *approval.Question
	tool, _ := p.o.Registry.Lookup(c.spec.Name)
	if q, ok := tool.(asker); ok && out.Outcome == apiv1.OutcomeOK {
		out, question = p.ask(c, q, a, out)
	}
	c.durations["invoke"] = out.Duration.Microseconds()
	p.o.Metrics.StageDuration.WithLabelValues("invoke").Observe(out.Duration.Seconds())
	resp := Response{CallID: c.callID, DecisionID: c.decisionID, RequestDigest: a.prepared.Digest()}
	resp.Outcome, resp.Content, resp.IsError, resp.Data = out.Outcome, out.Content, out.IsError, out.Data
	resp.Permanent = out.Permanent
	var reasons []string
	if c.canceled != nil && c.canceled() {
		// A sibling failed while this call ran: whatever the tool did
		// stays done, and the response says so.
		reasons = []string{ReasonCanceled}
		resp.Outcome, resp.Content, resp.IsError = apiv1.OutcomeCanceled, TextCanceled, true
		resp.Data = map[string]any{"started": true, "effects": EffectsNotUndone}
		resp.Permanent = false
		question = nil // nobody will wait for its answer
	}
	res := p.event(c, audit.PhaseResult, resp.Outcome, reasons)
	res.Input = a.input
	res.Result = &audit.ResultInfo{IsError: out.IsError, Bytes: out.Bytes, Truncated: out.Truncated}
	if out.Err != nil {
		res.Result.Error = out.Err.Error()
		p.o.Logger.Warn("tool failed", "tenant", id.Tenant, "tool", c.spec.Name, "call_id", c.callID, "err", out.Err)
	}
	// The effect happened: its result is recorded even when the caller (or
	// a failed batch sibling) canceled the context meanwhile.
	ctx = context.WithoutCancel(ctx)
	if question != nil {
		// The question commits with the result event that announces it,
		// or neither exists; approvals.max_pending is checked again under
		// the tenant's lock, as for a held call.
		unlock := p.pending.lock(id.Tenant)
		full, err := p.pendingFull(ctx, id.Tenant)
		if err == nil && full == "" {
			res.Question = &audit.QuestionInfo{ID: question.ID, ExpiresAt: audit.FormatTime(question.ExpiresAt)}
			t0 := time.Now()
			err = p.o.Audit.AppendWith(ctx, res, question)
			p.auditSpan(c, t0)
		}
		unlock()
		switch {
		case err == nil && full == "":
			return resp
		case full != "":
			// Nothing is asked: the call is refused like a held call.
			resp = rateLimited(Response{CallID: c.callID, DecisionID: c.decisionID, RequestDigest: a.prepared.Digest()}, MaxPendingRetryAfter)
			res = p.event(c, audit.PhaseResult, apiv1.OutcomeRateLimited, append([]string{full}, reasons...))
			res.Input = a.input
			res.Result = &audit.ResultInfo{IsError: true, Bytes: out.Bytes}
		default:
			// The model must not wait for an answer that can never come:
			// the call fails, and its result event says so, without the
			// question.
			p.o.Logger.Error("question not stored", "tenant", id.Tenant, "call_id", c.callID, "err", err)
			resp.Outcome, resp.Content, resp.IsError, resp.Data = apiv1.OutcomeToolError, invoke.ToolFailed, true, nil
			res = p.event(c, audit.PhaseResult, resp.Outcome, reasons)
			res.Input = a.input
			res.Result = &audit.ResultInfo{IsError: true, Bytes: out.Bytes, Error: "question not stored: " + err.Error()}
		}
	}
	t0 := time.Now()
	err := p.o.Audit.Append(ctx, res)
	p.auditSpan(c, t0)
	if err != nil {
		// The decision event is committed; failing the response now would
		// only invite a retry of the effect.
		p.o.Metrics.ResultAuditLost.Inc()
		p.o.Logger.Error("result event not written", "tenant", id.Tenant, "call_id", c.callID, "decision_id", c.decisionID, "err", err)
	}
	return resp
}

// refuse audits a decision that stops the call before authorization
// (unavailable, invalid arguments) and shapes its response. result is the
// policy's result when a policy gave one (availability's false), else nil.
func (p *Pipeline) refuse(ctx context.Context, c *call, outcome apiv1.Outcome, reasons []string, ie *prepare.InvalidArgumentsError, result any) (Response, error) {
	ev := p.event(c, audit.PhaseDecision, outcome, reasons)
	ev.Decision = result
	if c.spec != nil {
		in := prepare.AvailabilityInput(c.req.Identity, c.req.SessionID, c.spec)
		if ie != nil {
			in["problems"] = problems(ie)
		}
		ev.Input = in
	} else {
		ev.Input = map[string]any{"tool": map[string]any{"name": c.req.Tool}}
	}
	if err := p.append(ctx, c, ev, nil); err != nil {
		return Response{}, err
	}
	resp := Response{CallID: c.callID, DecisionID: c.decisionID, Outcome: outcome, IsError: true}
	switch outcome {
	case apiv1.OutcomeUnavailable:
		resp.Content = TextUnavailable
	case apiv1.OutcomeInvalidArguments:
		resp.Content = ie.Error()
	}
	return resp, nil
}

func problems(ie *prepare.InvalidArgumentsError) []any {
	out := make([]any, len(ie.Problems))
	for i, pr := range ie.Problems {
		out[i] = map[string]any{"pointer": pr.Pointer, "rule": pr.Rule}
	}
	return out
}

func (p *Pipeline) event(c *call, phase string, outcome apiv1.Outcome, reasons []string) *audit.Event {
	id := c.req.Identity
	ev := &audit.Event{
		Tenant:       id.Tenant,
		Principal:    id.Principal,
		Client:       id.Client,
		CallID:       c.callID,
		DecisionID:   c.decisionID,
		SessionID:    c.req.SessionID,
		Tool:         c.req.Tool,
		Phase:        phase,
		Outcome:      string(outcome),
		Reasons:      append([]string{}, reasons...),
		DurationsUS:  map[string]int64{},
		Via:          c.req.Via,
		MCPRequestID: c.req.MCPRequestID,
	}
	if c.rev != nil {
		ev.PolicyRevision = c.rev.ID()
	}
	if !tools.ValidName(ev.Tool) {
		ev.Tool = "" // never store an attacker-sized or malformed name
	}
	if c.spec != nil {
		ev.Action = c.spec.Action
	}
	if c.prepared != nil {
		ev.RequestDigest = c.prepared.Digest()
	}
	for k, v := range c.durations {
		ev.DurationsUS[k] = v
	}
	return ev
}

// append commits a decision event, with rec (a held call's approval) in
// the same transaction when it is not nil.
func (p *Pipeline) append(ctx context.Context, c *call, ev *audit.Event, rec any) error {
	t0 := time.Now()
	var err error
	if rec != nil {
		err = p.o.Audit.AppendWith(ctx, ev, rec)
	} else {
		err = p.o.Audit.Append(ctx, ev)
	}
	p.o.Metrics.StageDuration.WithLabelValues("audit").Observe(time.Since(t0).Seconds())
	p.auditSpan(c, t0)
	if err == nil {
		return nil
	}
	p.o.Logger.Error("decision event not written; failing closed", "tenant", ev.Tenant, "call_id", c.callID,
		"held", rec != nil, "err", err)
	if errors.Is(err, audit.ErrOverloaded) {
		return fmt.Errorf("%w: %v", ErrOverloaded, err)
	}
	return fmt.Errorf("%w: %v", ErrAudit, err)
}

func (p *Pipeline) revision() (Revision, error) {
	rev, err := p.o.Engine.Current()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPolicy, err)
	}
	return rev, nil
}

// available evaluates the availability entrypoint for a tool and, for a
// chooser's value, with that value as input.choice.
func (p *Pipeline) available(ctx context.Context, rev Revision, id *identity.Identity, sessionID string, s *tools.Spec, choice map[string]any) (bool, error) {
	key, err := prepare.AvailabilityKey(id, sessionID, s, choice)
	if err != nil {
		return false, fmt.Errorf("%w: %v", errInternal, err)
	}
	// The document is only built when the policy really runs.
	input := func() (ast.Value, error) {
		doc := prepare.AvailabilityInput(id, sessionID, s)
		if choice != nil {
			doc["choice"] = choice
		}
		return ast.InterfaceToValue(doc)
	}
	ok, err := rev.Available(ctx, nil, decision.WithCacheKey(key), decision.WithInputFunc(input))
	if err != nil {
		p.o.Logger.Error("availability failed closed", "tenant", id.Tenant, "tool", s.Name, "err", err)
		return false, fmt.Errorf("%w: %w", ErrPolicy, err)
	}
	return ok, nil
}

func (p *Pipeline) stage(name string, c *call, t0 time.Time) {
	d := time.Since(t0)
	c.durations[name] += d.Microseconds()
	p.o.Metrics.StageDuration.WithLabelValues(name).Observe(d.Seconds())
	telemetry.Stage(p.tracer, c.span, name, t0, t0.Add(d))
}

// errInternal marks failures that are bugs or environment faults, not
// dependencies being down; the API answers 500.
var errInternal = errors.New("internal error")

// IsInternal reports whether err is an internal failure.
func IsInternal(err error) bool { return errors.Is(err, errInternal) }

func causeOf(err error) string {
	switch {
	case errors.Is(err, ErrPolicy):
		return "policy"
	case errors.Is(err, ErrOverloaded):
		return "audit_overloaded"
	case errors.Is(err, ErrAudit):
		return "audit"
	case errors.Is(err, ErrLimits):
		return "limits"
	}
	return "internal"
}

// policyFailed audits a decision policy could not make — no policy
// loaded, availability or authorization failing at run time (a conflict,
// a builtin's error), a malformed decision, a failing mask — as a decision
// event of outcome error carrying the error's code, message and location
// (never shown to the model), on input. The call then fails closed with
// ErrPolicy, or with the audit error when even the event cannot be
// written. A caller that went away is not audited (nothing was decided
// for anyone). phase is the decision's, or the result's for a decided
// call whose availability could not be checked again before it ran.
func (p *Pipeline) policyFailed(ctx context.Context, c *call, phase string, cause error, input map[string]any) error {
	failed := fmt.Errorf("%w: %v", ErrPolicy, cause)
	if ctx.Err() != nil {
		return failed
	}
	e := auditErrorOf(cause)
	ev := p.event(c, phase, apiv1.OutcomeError, []string{"policy failed: " + e.Code})
	ev.Error = e
	ev.Input = input
	if err := p.append(ctx, c, ev, nil); err != nil {
		return err
	}
	return failed
}

// auditErrorOf is a policy failure as the audit event records it: OPA's
// runtime error as it is, or Toolgate's own code.
func auditErrorOf(err error) *apiv1.AuditError {
	if ee := decision.EvalErrorOf(err); ee != nil {
		return &apiv1.AuditError{Code: ee.Code, Message: ee.Message, Location: ee.Location}
	}
	msg := err.Error()
	for _, known := range []struct {
		target error
		code   string
	}{
		{decision.ErrNoPolicy, "no_policy"},
		{decision.ErrMalformed, "malformed_decision"},
	} {
		if errors.Is(err, known.target) {
			return &apiv1.AuditError{Code: known.code, Message: msg}
		}
	}
	return &apiv1.AuditError{Code: "evaluation_error", Message: msg}
}

// availabilityInput is the availability document of c's caller and tool,
// for an event written before (or when) availability could not run.
func (p *Pipeline) availabilityInput(c *call) map[string]any {
	if t, ok := p.o.Registry.Lookup(c.req.Tool); ok {
		return prepare.AvailabilityInput(c.req.Identity, c.req.SessionID, t.Spec())
	}
	return map[string]any{"tool": map[string]any{"name": c.req.Tool}}
}
