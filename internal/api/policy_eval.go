package api

import (
	"errors"
	"net/http"

	"github.com/go-json-experiment/json"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/decision"
	"github.com/toolgate/toolgate/internal/pipeline"
)

type (
	evalBody     = apiv1.PolicyEvalRequest
	firedRule    = apiv1.FiredRule
	evalResponse = apiv1.PolicyEvalResponse
)

// evalPolicy answers POST /v1/policy/eval (policy-admin): what the current
// revision decides, with no effect and no audit event; the evaluation is
// logged as an administrator's action.
func (s *Server) evalPolicy(w http.ResponseWriter, r *http.Request) {
	body, rerr := readBody(w, r, s.o.MaxBodyBytes)
	if rerr != nil {
		writeError(w, rerr.status, rerr.code, rerr.message)
		return
	}
	var in evalBody
	if err := json.Unmarshal(body, &in, json.RejectUnknownMembers(true)); err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, "body must be {\"input\":{…}} or {\"tool\",\"arguments\",\"principal\":{\"id\",\"roles\",\"groups\"},\"session_id\"}, with an optional \"explain\"")
		return
	}
	admin := identity(r)
	req := pipeline.EvalRequest{Admin: admin, Explain: in.Explain}
	switch {
	case !decision.ValidExplain(in.Explain):
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, "explain must be notes, fails or full")
		return
	case in.Input != nil && in.Tool == "" && in.Principal == nil && in.Arguments == nil && in.SessionID == "":
		req.Document = in.Input
	case in.Input == nil && in.Tool != "" && in.Principal != nil && in.Principal.ID != "":
		if in.SessionID != "" && !idRE.MatchString(in.SessionID) {
			writeError(w, http.StatusBadRequest, CodeInvalidRequest, "session_id must be 1-128 characters of letters, digits and ._:@-")
			return
		}
		req.Tool, req.Arguments, req.SessionID = in.Tool, in.Arguments, in.SessionID
		req.As = &auth.Identity{Principal: in.Principal.ID, Roles: in.Principal.Roles, Groups: in.Principal.Groups, Claims: in.Principal.Claims}
	default:
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, "give either \"input\" (a request document) or \"tool\" with \"principal\" (and optional \"arguments\", \"session_id\"), not both")
		return
	}
	res, err := s.o.Pipeline.Evaluate(r.Context(), req)
	if errors.Is(err, pipeline.ErrEvalRequest) {
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, "the request document must be a JSON object of your own tenant")
		return
	}
	if err != nil {
		writePipelineError(w, err)
		return
	}
	s.o.Logger.Info("policy evaluated by an administrator", "tenant", admin.Tenant, "principal", admin.Principal,
		"revision", res.Revision, "tool", req.Tool, "document", req.Document != nil, "outcome", res.Outcome, "explain", req.Explain)
	out := evalResponse{
		Revision: res.Revision, Outcome: res.Outcome, Available: res.Available, Reasons: res.Reasons,
		Rules: []firedRule{}, Input: res.Document, Problems: res.Problems,
	}
	if ev := res.Evaluation; ev != nil {
		out.Decision, out.Message, out.Explanation = ev.Raw, ev.Decision.Message, ev.Explanation
		for _, f := range ev.Rules {
			out.Rules = append(out.Rules, firedRule{Rule: f.Rule, Location: f.Location, Title: f.Title})
		}
	}
	writeJSON(w, http.StatusOK, out)
}
