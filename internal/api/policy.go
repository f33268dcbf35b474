package api

import (
	"net/http"
)

// policy answers GET /v1/policy: the revision serving now, its modules, and
// the last failed reload if it has not been fixed since.
func (s *Server) policy(w http.ResponseWriter, r *http.Request) {
	info, err := s.o.Policy.Info(r.Context(), caller(r))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}
