package api

import (
	"net/http"
)

// policy answers GET /v1/policy: the revision serving now, its modules, and
// the last failed reload if it has not been fixed since.
func (s *Server) policy(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.o.Policy.Info(r.Context()))
}
