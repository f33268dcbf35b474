package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/go-json-experiment/json/jsontext"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/pipeline"
)

type (
	callResponse     = apiv1.CallResponse
	decisionResponse = apiv1.DecisionResponse
)

// listTools answers GET /v1/tools: only what availability offers this
// caller, in declaration order, with the schema that prepare enforces.
func (s *Server) listTools(w http.ResponseWriter, r *http.Request) {
	session := r.URL.Query().Get("session_id")
	if session != "" && !idRE.MatchString(session) {
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, "session_id must be 1-128 characters of letters, digits and ._:@-")
		return
	}
	specs, err := s.o.Pipeline.Tools(r.Context(), identity(r), session)
	if err != nil {
		writePipelineError(w, err)
		return
	}
	out := apiv1.ToolList{Tools: make([]apiv1.Tool, 0, len(specs))}
	for _, sp := range specs {
		out.Tools = append(out.Tools, apiv1.Tool{Name: sp.Name, Description: sp.Description, InputSchema: jsontext.Value(sp.InputSchema)})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) callTool(w http.ResponseWriter, r *http.Request) {
	req, ok := s.callRequest(w, r)
	if !ok {
		return
	}
	resp, err := s.o.Pipeline.Call(r.Context(), req)
	noteCall(r, resp.CallID, resp.DecisionID)
	if err != nil {
		writePipelineError(w, err)
		return
	}
	if resp.Outcome == apiv1.OutcomeRateLimited {
		writeRateLimited(w, resp)
		return
	}
	if resp.Permanent {
		// The tool ran (both events are audited) and said retrying cannot
		// help: a status the platform acts on, not a result for the model.
		writeJSON(w, http.StatusFailedDependency, errorBody{Error: errorDetail{
			Code: CodePermanentFailure, Message: "the tool reported a permanent failure; end the run rather than retry",
			CallID: resp.CallID, DecisionID: resp.DecisionID,
		}})
		return
	}
	writeJSON(w, http.StatusOK, callResponse{
		CallID: resp.CallID, DecisionID: resp.DecisionID, Outcome: resp.Outcome,
		Content: resp.Content, IsError: resp.IsError, Data: resp.Data,
	})
}

func (s *Server) decideTool(w http.ResponseWriter, r *http.Request) {
	req, ok := s.callRequest(w, r)
	if !ok {
		return
	}
	resp, err := s.o.Pipeline.Decide(r.Context(), req)
	noteCall(r, resp.CallID, resp.DecisionID)
	if err != nil {
		writePipelineError(w, err)
		return
	}
	if resp.Outcome == apiv1.OutcomeRateLimited {
		writeRateLimited(w, resp)
		return
	}
	writeJSON(w, http.StatusOK, decisionResponse{
		CallID: resp.CallID, DecisionID: resp.DecisionID, Outcome: resp.Outcome,
		Content: resp.Content, RequestDigest: resp.RequestDigest,
	})
}

func (s *Server) callRequest(w http.ResponseWriter, r *http.Request) (pipeline.Request, bool) {
	body, rerr := readBody(w, r, s.o.MaxBodyBytes)
	if rerr == nil {
		var env callEnvelope
		env, rerr = decodeCallEnvelope(body)
		if rerr == nil {
			return pipeline.Request{
				Identity:  identity(r),
				Tool:      chi.URLParam(r, "name"),
				Arguments: env.Arguments,
				SessionID: env.SessionID,
				CallID:    env.CallID,
			}, true
		}
	}
	s.o.Logger.Info("rejected request envelope", "path", r.URL.Path, "tenant", identity(r).Tenant, "principal", identity(r).Principal, "err", rerr.message)
	writeError(w, rerr.status, rerr.code, rerr.message)
	return pipeline.Request{}, false
}
