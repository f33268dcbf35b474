package backend

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
	"github.com/toolgate/toolgate/internal/service"
)

// PolicyEngine is what the Policy service reads of the enforced policy
// (*decision.Engine): its status and the revision serving now.
type PolicyEngine interface {
	Status() decision.Status
	Current() (*decision.Revision, error)
}

var _ PolicyEngine = (*decision.Engine)(nil)

// PolicyOptions wire the Policy service.
type PolicyOptions struct {
	Engine   PolicyEngine
	Pipeline *pipeline.Pipeline
	Audit    replay.Querier
	Logger   *slog.Logger
}

// NewPolicy is the Policy service, checked (service.CheckedPolicy).
func NewPolicy(o PolicyOptions) service.Policy {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return service.CheckedPolicy(policy{o})
}

type policy struct{ o PolicyOptions }

func (s policy) Info(context.Context, *identity.Identity) (apiv1.PolicyInfo, error) {
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
	return resp, nil
}

func (s policy) Evaluate(ctx context.Context, req service.EvalRequest) (apiv1.PolicyEvalResponse, error) {
	res, err := s.o.Pipeline.Evaluate(ctx, pipeline.EvalRequest{
		Admin: req.Admin, Document: req.Document, Tool: req.Tool, Arguments: req.Arguments,
		As: req.As, SessionID: req.SessionID, Explain: req.Explain,
	})
	if errors.Is(err, pipeline.ErrEvalRequest) {
		return apiv1.PolicyEvalResponse{}, &service.Error{Kind: service.KindInvalid, Message: "the request document must be a JSON object of your own tenant", Err: err}
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
		var ee *decision.EvalError
		if errors.As(ev.Err, &ee) {
			out.Error = &apiv1.PolicyEvalError{Code: ee.Code, Message: ee.Message, Location: ee.Location}
		}
		for _, f := range ev.Rules {
			out.Rules = append(out.Rules, apiv1.FiredRule{Rule: f.Rule, Location: f.Location, Title: f.Title})
		}
	}
	return out, nil
}

func (s policy) Replay(ctx context.Context, req service.ReplayRequest) (*service.ReplayReport, error) {
	var rev *decision.Revision
	if req.Shadow {
		eng := s.o.Pipeline.ShadowEngine()
		if eng == nil {
			return nil, service.Errorf(service.KindInvalid, "no shadow policy is configured (policy.shadow)")
		}
		var err error
		if rev, err = eng.Current(); err != nil {
			return nil, &service.Error{Kind: service.KindUnavailable, Message: "the shadow policy is not loaded", Err: err}
		}
	} else {
		var msg string
		if rev, msg = compileCandidate(ctx, req.Modules, req.Data); rev == nil {
			return nil, &service.Error{Kind: service.KindInvalid, Message: msg}
		}
	}
	changes := min(max(req.Changes, 0), service.MaxReplayChanges)
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
	return replayReport(rep), nil
}

func (s policy) ShadowSummary(ctx context.Context, req service.ShadowRequest) (service.ShadowSummary, error) {
	var out service.ShadowSummary
	if eng := s.o.Pipeline.ShadowEngine(); eng != nil {
		out.Configured = true
		if rev, err := eng.Current(); err == nil {
			out.Revision = rev.ID()
		}
	}
	limit := req.Max
	if limit <= 0 || limit > service.MaxShadowEvents {
		limit = service.MaxShadowEvents
	}
	f := audit.Filter{Phase: audit.PhaseDecision, From: req.From, To: req.To, Limit: min(limit, 1000)}
	for {
		page, err := s.o.Audit.Query(ctx, req.Admin.Tenant, f)
		if errors.Is(err, audit.ErrBadFilter) {
			return service.ShadowSummary{}, &service.Error{Kind: service.KindInvalid, Message: "from must not be after to", Err: err}
		}
		if err != nil {
			if errors.Is(err, context.Canceled) {
				return service.ShadowSummary{}, err
			}
			s.o.Logger.Error("shadow summary failed", "err", err)
			return service.ShadowSummary{}, errAuditUnavailable(err)
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
	if len(modules) > service.MaxReplayModules {
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

// replayReport is rep as the service answers it.
func replayReport(rep *replay.Report) *service.ReplayReport {
	out := &service.ReplayReport{
		Candidate: rep.Candidate, Events: rep.Events, Replayed: rep.Replayed, Unchanged: rep.Unchanged, Changed: rep.Changed,
		NotReplayable: service.ReplayGroup(rep.NotReplayable), Skipped: rep.Skipped,
	}
	if rep.ByDirection != nil {
		out.ByDirection = make(map[string]*service.ReplayGroup, len(rep.ByDirection))
	}
	if rep.ByTool != nil {
		out.ByTool = make(map[string]*service.ReplayToolGroup, len(rep.ByTool))
	}
	for k, g := range rep.ByDirection {
		out.ByDirection[k] = (*service.ReplayGroup)(g)
	}
	for k, g := range rep.ByTool {
		out.ByTool[k] = (*service.ReplayToolGroup)(g)
	}
	for _, c := range rep.Changes {
		out.Changes = append(out.Changes, service.ReplayChange(c))
	}
	return out
}
