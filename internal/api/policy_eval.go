package api

import (
	"net/http"

	"github.com/go-json-experiment/json"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/service"
)

type evalBody = apiv1.PolicyEvalRequest

// evalPolicy answers POST /v1/policy/eval (policy-admin): what the current
// revision decides, with no effect and no audit event; the evaluation is
// logged as an administrator's action.
func (s *Server) evalPolicy(w http.ResponseWriter, r *http.Request) {
	body, rerr := readBody(w, r, s.o.MaxBodyBytes)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	var in evalBody
	if err := json.Unmarshal(body, &in, json.RejectUnknownMembers(true)); err != nil {
		writeError(w, badRequest("body must be {\"input\":{…}} or {\"tool\",\"arguments\",\"principal\":{\"id\",\"roles\",\"groups\"},\"session_id\"}, with an optional \"explain\""))
		return
	}
	admin := caller(r)
	req := service.EvalRequest{Admin: admin, Explain: in.Explain}
	switch {
	case in.Input != nil && in.Tool == "" && in.Principal == nil && in.Arguments == nil && in.SessionID == "":
		req.Document = in.Input
	case in.Input == nil && in.Tool != "" && in.Principal != nil && in.Principal.ID != "":
		req.Tool, req.Arguments, req.SessionID = in.Tool, in.Arguments, in.SessionID
		req.As = &identity.Identity{Principal: in.Principal.ID, Roles: in.Principal.Roles, Groups: in.Principal.Groups, Claims: in.Principal.Claims}
	default:
		writeError(w, badRequest("give either \"input\" (a request document) or \"tool\" with \"principal\" (and optional \"arguments\", \"session_id\"), not both"))
		return
	}
	res, err := s.o.Policy.Evaluate(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
