package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/toolgate/toolgate/internal/service"
)

// listEvents answers GET /v1/audit/events for the caller's tenant only.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "tool", "principal", "outcome", "phase", "session_id", "call_id", "decision_id", "from", "to", "limit", "cursor":
		default:
			writeError(w, badRequest("unknown query parameter %s", strconv.Quote(truncate(k, 64))))
			return
		}
		if len(q[k]) > 1 {
			writeError(w, badRequest("query parameter %s given more than once", strconv.Quote(k)))
			return
		}
	}
	f := service.AuditFilter{
		Tool: q.Get("tool"), Principal: q.Get("principal"), Outcome: q.Get("outcome"),
		Phase: q.Get("phase"), SessionID: q.Get("session_id"), CallID: q.Get("call_id"),
		DecisionID: q.Get("decision_id"), Cursor: q.Get("cursor"),
	}
	for _, tb := range []struct {
		name string
		dst  *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		if v := q.Get(tb.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				writeError(w, badRequest("%s must be an RFC 3339 time", tb.name))
				return
			}
			*tb.dst = t
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 { // the service checks the most
			writeError(w, badRequest("limit must be an integer from 1 to 1000"))
			return
		}
		f.Limit = n
	}
	page, err := s.o.Audit.Events(r.Context(), caller(r), f)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

func (s *Server) getEvent(w http.ResponseWriter, r *http.Request) {
	ev, err := s.o.Audit.Event(r.Context(), caller(r), chi.URLParam(r, "id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ev)
}

func (s *Server) verify(w http.ResponseWriter, r *http.Request) {
	res, err := s.o.Audit.Verify(r.Context(), caller(r))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
