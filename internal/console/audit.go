package console

import "net/http"

// TODO(console): audit pages (being built).
func (s *Server) auditList(w http.ResponseWriter, r *http.Request) {
	s.fail(w, r, http.StatusNotImplemented, "not built yet")
}
func (s *Server) auditEvent(w http.ResponseWriter, r *http.Request) {
	s.fail(w, r, http.StatusNotImplemented, "not built yet")
}
func (s *Server) auditExport(w http.ResponseWriter, r *http.Request) {
	s.fail(w, r, http.StatusNotImplemented, "not built yet")
}
func (s *Server) auditVerify(w http.ResponseWriter, r *http.Request) {
	s.fail(w, r, http.StatusNotImplemented, "not built yet")
}
