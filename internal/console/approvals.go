package console

import "net/http"

// TODO(console): approvals pages (being built).
func (s *Server) approvalsPage(w http.ResponseWriter, r *http.Request) {
	s.fail(w, r, http.StatusNotImplemented, "not built yet")
}
func (s *Server) approve(w http.ResponseWriter, r *http.Request) {
	s.fail(w, r, http.StatusNotImplemented, "not built yet")
}
func (s *Server) deny(w http.ResponseWriter, r *http.Request) {
	s.fail(w, r, http.StatusNotImplemented, "not built yet")
}
func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	s.fail(w, r, http.StatusNotImplemented, "not built yet")
}
