package api

import (
	apiv1 "github.com/toolgate/toolgate/api/v1"
	"net/http"
	"time"
)

type (
	policyModule   = apiv1.PolicyModule
	policyResponse = apiv1.PolicyInfo
	policyError    = apiv1.PolicyError
)

// policy answers GET /v1/policy: the revision serving now, its modules, and
// the last failed reload if it has not been fixed since.
func (s *Server) policy(w http.ResponseWriter, r *http.Request) {
	st := s.o.Engine.Status()
	resp := policyResponse{Modules: []policyModule{}}
	if rev, err := s.o.Engine.Current(); err == nil {
		resp.Revision = rev.ID()
		resp.LoadedAt = rev.LoadedAt().UTC().Format(time.RFC3339Nano)
		for _, m := range rev.Modules() {
			resp.Modules = append(resp.Modules, policyModule{Path: m.Path, SHA256: m.SHA256})
		}
	}
	if st.LastError != "" {
		resp.LastError = &policyError{Message: st.LastError, At: st.LastErrorAt.UTC().Format(time.RFC3339Nano)}
	}
	writeJSON(w, http.StatusOK, resp)
}
