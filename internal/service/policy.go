package service

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/go-json-experiment/json"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/decision"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/pipeline"
	"github.com/toolgate/toolgate/internal/replay"
)

// EvalRequest asks what the current revision would decide, without effect
// and without an audit event (pipeline.EvalRequest).
type EvalRequest = pipeline.EvalRequest

// ReplayReport is the answer of a replay (POST /v1/policy/replay).
type ReplayReport = replay.Report

// ReplayChange is one changed decision a replay lists (ReplayRequest.Changes).
type ReplayChange = replay.Change

// ReplayRequest re-evaluates the caller's tenant's audited decisions
// between From and To against a candidate: the configured shadow policy
// (Shadow), or inline Modules (file name → Rego source) and Data.
// Changes asks the report to list up to that many changed decisions
// one by one (ReplayReport.Changes, newest first).
type ReplayRequest struct {
	Admin    *identity.Identity
	Shadow   bool
	Modules  map[string]string
	Data     map[string]any
	From, To time.Time
	Changes  int
}

// MaxReplayChanges bounds ReplayRequest.Changes.
const MaxReplayChanges = 1000

// ShadowRequest asks how the shadow policy's verdicts, audited with each
// decision, compared with the enforced decisions of the caller's tenant
// between From and To (zero: unbounded), reading at most Max decision
// events, newest first (0 or more than MaxShadowEvents: MaxShadowEvents).
type ShadowRequest struct {
	Admin    *identity.Identity
	From, To time.Time
	Max      int
}

// MaxShadowEvents bounds the decision events ShadowSummary reads.
const MaxShadowEvents = 10000

// ShadowSummary counts shadow verdicts as the toolgate_shadow_decisions_total
// metric does, but from the caller's tenant's audit log.
type ShadowSummary struct {
	// Configured: a shadow policy is configured (policy.shadow);
	// Revision is its revision serving now ("" when none is loaded).
	Configured bool
	Revision   string
	Events     int // decision events read
	Compared   int // of them, those with a shadow verdict
	Agree      int
	// AllowToDeny: the enforced decision allowed (or held for approval),
	// the shadow denies; DenyToAllow the other way round.
	AllowToDeny int
	DenyToAllow int
	Errors      int  // the shadow policy failed to evaluate
	Truncated   bool // the window holds more decision events than were read
}

// MaxReplayModules bounds the modules of an inline candidate.
const MaxReplayModules = 200

// Policy is policy administration: what serves now, what it would decide,
// and what a candidate would have decided on the audited past.
type Policy interface {
	// Info is the revision serving now, its modules, and the last failed
	// reload if it has not been fixed since.
	Info(ctx context.Context) apiv1.PolicyInfo
	// Evaluate is what the current revision decides for a request
	// document or a would-be call. KindInvalid: a document that is not
	// the administrator's tenant's.
	Evaluate(ctx context.Context, req EvalRequest) (apiv1.PolicyEvalResponse, error)
	// Replay re-evaluates audited decisions against a candidate.
	// KindInvalid: no shadow policy, or a candidate that does not
	// compile (the message names the caller's own file:line problems);
	// KindUnavailable: the shadow policy is not loaded, or the audit log
	// cannot be read.
	Replay(ctx context.Context, req ReplayRequest) (*ReplayReport, error)
	// ShadowSummary counts how the shadow verdicts audited in a window
	// compared with the enforced decisions. KindInvalid: from after to;
	// KindUnavailable: the audit log cannot be read.
	ShadowSummary(ctx context.Context, req ShadowRequest) (ShadowSummary, error)
}

// PolicyOptions wire the Policy service.
type PolicyOptions struct {
	Engine   *decision.Engine
	Pipeline *pipeline.Pipeline
	Audit    replay.Querier
	Logger   *slog.Logger
}

// NewPolicy is the Policy service.
func NewPolicy(o PolicyOptions) Policy {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return policy{o}
}

type policy struct{ o PolicyOptions }

func (s policy) Info(context.Context) apiv1.PolicyInfo {
	st := s.o.Engine.Status()
	resp := apiv1.PolicyInfo{Modules: []apiv1.PolicyModule{}}
	if rev, err := s.o.Engine.Current(); err == nil {
		resp.Revision = rev.ID()
		resp.LoadedAt = rev.LoadedAt().UTC().Format(time.RFC3339Nano)
		for _, m := range rev.Modules() {
			resp.Modules = append(resp.Modules, apiv1.PolicyModule{Path: m.Path, SHA256: m.SHA256})
		}
	}
	if st.LastError != "" {
		resp.LastError = &apiv1.PolicyError{Message: st.LastError, At: st.LastErrorAt.UTC().Format(time.RFC3339Nano)}
	}
	return resp
}

func (s policy) Evaluate(ctx context.Context, req EvalRequest) (apiv1.PolicyEvalResponse, error) {
	res, err := s.o.Pipeline.Evaluate(ctx, req)
	if errors.Is(err, pipeline.ErrEvalRequest) {
		return apiv1.PolicyEvalResponse{}, &Error{Kind: KindInvalid, Message: "the request document must be a JSON object of your own tenant", Err: err}
	}
	if err != nil {
		return apiv1.PolicyEvalResponse{}, callError(err)
	}
	admin := req.Admin
	s.o.Logger.Info("policy evaluated by an administrator", "tenant", admin.Tenant, "principal", admin.Principal,
		"revision", res.Revision, "tool", req.Tool, "document", req.Document != nil, "outcome", res.Outcome, "explain", req.Explain)
	out := apiv1.PolicyEvalResponse{
		Revision: res.Revision, Outcome: res.Outcome, Available: res.Available, Reasons: res.Reasons,
		Rules: []apiv1.FiredRule{}, Input: res.Document, Problems: res.Problems,
	}
	if ev := res.Evaluation; ev != nil {
		out.Decision, out.Message, out.Explanation = ev.Raw, ev.Decision.Message, ev.Explanation
		for _, f := range ev.Rules {
			out.Rules = append(out.Rules, apiv1.FiredRule{Rule: f.Rule, Location: f.Location, Title: f.Title})
		}
	}
	return out, nil
}

func (s policy) Replay(ctx context.Context, req ReplayRequest) (*ReplayReport, error) {
	var rev *decision.Revision
	if req.Shadow {
		eng := s.o.Pipeline.ShadowEngine()
		if eng == nil {
			return nil, Errorf(KindInvalid, "no shadow policy is configured (policy.shadow)")
		}
		var err error
		if rev, err = eng.Current(); err != nil {
			return nil, &Error{Kind: KindUnavailable, Message: "the shadow policy is not loaded", Err: err}
		}
	} else {
		var msg string
		if rev, msg = compileCandidate(ctx, req.Modules, req.Data); rev == nil {
			return nil, &Error{Kind: KindInvalid, Message: msg}
		}
	}
	changes := min(max(req.Changes, 0), MaxReplayChanges)
	rep, err := replay.Run(ctx, s.o.Audit, rev, replay.Options{Tenants: []string{req.Admin.Tenant}, From: req.From, To: req.To, Changes: changes})
	if err != nil {
		s.o.Logger.Error("policy replay failed", "err", err)
		if errors.Is(err, context.Canceled) {
			return nil, err // the caller went away: nobody to answer
		}
		return nil, errAuditUnavailable(err)
	}
	s.o.Logger.Info("policy replayed by an administrator", "tenant", req.Admin.Tenant, "principal", req.Admin.Principal,
		"candidate", rep.Candidate, "events", rep.Events, "changed", rep.Changed)
	return rep, nil
}

func (s policy) ShadowSummary(ctx context.Context, req ShadowRequest) (ShadowSummary, error) {
	var out ShadowSummary
	if eng := s.o.Pipeline.ShadowEngine(); eng != nil {
		out.Configured = true
		if rev, err := eng.Current(); err == nil {
			out.Revision = rev.ID()
		}
	}
	limit := req.Max
	if limit <= 0 || limit > MaxShadowEvents {
		limit = MaxShadowEvents
	}
	f := audit.Filter{Phase: audit.PhaseDecision, From: req.From, To: req.To, Limit: min(limit, 1000)}
	for {
		page, err := s.o.Audit.Query(ctx, req.Admin.Tenant, f)
		if errors.Is(err, audit.ErrBadFilter) {
			return ShadowSummary{}, &Error{Kind: KindInvalid, Message: "from must not be after to", Err: err}
		}
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return ShadowSummary{}, err
			}
			s.o.Logger.Error("shadow summary failed", "err", err)
			return ShadowSummary{}, errAuditUnavailable(err)
		}
		for _, ev := range page.Events {
			if out.Events == limit {
				out.Truncated = true
				return out, nil
			}
			out.Events++
			sh := ev.Shadow
			switch {
			case sh == nil:
				continue
			case sh.Outcome == string(apiv1.OutcomeError):
				out.Errors++
			case !sh.Diverged:
				out.Agree++
			case sh.Outcome == string(apiv1.OutcomeDenied):
				out.AllowToDeny++
			default:
				out.DenyToAllow++
			}
			out.Compared++
		}
		if page.NextCursor == "" {
			return out, nil
		}
		f.Cursor = page.NextCursor
	}
}

var moduleName = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}\.rego$`)

// compileCandidate compiles inline modules in a temporary folder with the
// engine's own loader and checks, so a candidate is judged exactly as a
// policy folder would be. The message is safe to return (file:line
// problems of the caller's own modules).
func compileCandidate(ctx context.Context, modules map[string]string, data map[string]any) (*decision.Revision, string) {
	if len(modules) > MaxReplayModules {
		return nil, "too many modules"
	}
	dir, err := os.MkdirTemp("", "toolgate-replay-")
	if err != nil {
		return nil, "cannot stage the candidate policy"
	}
	defer os.RemoveAll(dir)
	for name, src := range modules {
		if !moduleName.MatchString(name) {
			return nil, "module names must be plain file names ending in .rego"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			return nil, "cannot stage the candidate policy"
		}
	}
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			return nil, "data is not JSON"
		}
		if err := os.WriteFile(filepath.Join(dir, "data.json"), b, 0o600); err != nil {
			return nil, "cannot stage the candidate policy"
		}
	}
	eng := decision.NewEngine(decision.Options{Dir: dir})
	if err := eng.Load(ctx); err != nil {
		return nil, "candidate policy rejected: " + err.Error()
	}
	rev, _ := eng.Current()
	return rev, ""
}

// The audit log is what the gateway passes as PolicyOptions.Audit.
var _ replay.Querier = (*audit.Log)(nil)

// ValidExplain reports whether explain is a level Evaluate accepts ("",
// notes, fails or full).
func ValidExplain(explain string) bool { return decision.ValidExplain(explain) }
