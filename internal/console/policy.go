package console

import "net/http"

// TODO(console): policy pages (being built).
func (s *Server) policyPage(w http.ResponseWriter, r *http.Request) {
	s.fail(w, r, http.StatusNotImplemented, "not built yet")
}
func (s *Server) policyEval(w http.ResponseWriter, r *http.Request) {
	s.fail(w, r, http.StatusNotImplemented, "not built yet")
}
func (s *Server) policyReplay(w http.ResponseWriter, r *http.Request) {
	s.fail(w, r, http.StatusNotImplemented, "not built yet")
}
