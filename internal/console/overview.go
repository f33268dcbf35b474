package console

import "net/http"

// overview is the landing page.
func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == Prefix {
		http.Redirect(w, r, Prefix+"/", http.StatusMovedPermanently)
		return
	}
	s.render(w, r, http.StatusOK, "overview", view{Title: "Overview", Active: "overview"})
}
