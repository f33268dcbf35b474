package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/service"
)

// listTools answers GET /v1/tools: only what availability offers this
// caller, in declaration order, with the schema that prepare enforces.
func (s *Server) listTools(w http.ResponseWriter, r *http.Request) {
	session := r.URL.Query().Get("session_id") // the service checks its syntax
	tools, err := s.o.Calls.Tools(r.Context(), caller(r), session)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, apiv1.ToolList{Tools: tools})
}

func (s *Server) callTool(w http.ResponseWriter, r *http.Request) {
	req, ok := s.callRequest(w, r)
	if !ok {
		return
	}
	resp, err := s.o.Calls.Call(r.Context(), req)
	noteCall(r, resp.CallID, resp.DecisionID)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) decideTool(w http.ResponseWriter, r *http.Request) {
	req, ok := s.callRequest(w, r)
	if !ok {
		return
	}
	resp, err := s.o.Calls.Decide(r.Context(), req)
	noteCall(r, resp.CallID, resp.DecisionID)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) callRequest(w http.ResponseWriter, r *http.Request) (service.CallRequest, bool) {
	body, rerr := readBody(w, r, s.o.MaxBodyBytes)
	if rerr == nil {
		var env callEnvelope
		env, rerr = decodeCallEnvelope(body)
		if rerr == nil {
			return service.CallRequest{
				Identity:  caller(r),
				Tool:      chi.URLParam(r, "name"),
				Arguments: env.Arguments,
				SessionID: env.SessionID,
				CallID:    env.CallID,
			}, true
		}
	}
	s.o.Logger.Info("rejected request envelope", "path", r.URL.Path, "tenant", caller(r).Tenant, "principal", caller(r).Principal, "err", rerr.Message)
	writeError(w, rerr)
	return service.CallRequest{}, false
}
