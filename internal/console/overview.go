package console

import "net/http"

// overview is the landing page.
func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "overview", view{Title: "Overview", Active: "overview"})
}
