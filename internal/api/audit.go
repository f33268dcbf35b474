package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/audit"
)

// listEvents answers GET /v1/audit/events for the caller's tenant only.
func (s *Server) listEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "tool", "principal", "outcome", "phase", "session_id", "call_id", "decision_id", "from", "to", "limit", "cursor":
		default:
			writeError(w, http.StatusBadRequest, CodeInvalidRequest, "unknown query parameter "+strconv.Quote(truncate(k, 64)))
			return
		}
		if len(q[k]) > 1 {
			writeError(w, http.StatusBadRequest, CodeInvalidRequest, "query parameter "+strconv.Quote(k)+" given more than once")
			return
		}
	}
	f := audit.Filter{
		Tool: q.Get("tool"), Principal: q.Get("principal"), Outcome: q.Get("outcome"),
		Phase: q.Get("phase"), SessionID: q.Get("session_id"), CallID: q.Get("call_id"),
		DecisionID: q.Get("decision_id"), Cursor: q.Get("cursor"), Limit: 100,
	}
	for _, tb := range []struct {
		name string
		dst  *time.Time
	}{{"from", &f.From}, {"to", &f.To}} {
		if v := q.Get(tb.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				writeError(w, http.StatusBadRequest, CodeInvalidRequest, tb.name+" must be an RFC 3339 time")
				return
			}
			*tb.dst = t
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, CodeInvalidRequest, "limit must be an integer from 1 to 1000")
			return
		}
		f.Limit = n
	}
	page, err := s.o.Audit.Query(r.Context(), identity(r).Tenant, f)
	if err != nil {
		if errors.Is(err, audit.ErrBadCursor) || errors.Is(err, audit.ErrBadFilter) {
			writeError(w, http.StatusBadRequest, CodeInvalidRequest, "cursor or filter is not valid (a cursor belongs to its tenant and filters; from must not be after to)")
			return
		}
		s.o.Logger.Error("audit query failed", "err", err)
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "audit log is unavailable")
		return
	}
	events := page.Events
	if events == nil {
		events = []*audit.Event{}
	}
	writeJSON(w, http.StatusOK, apiv1.AuditEventPage{Events: events, NextCursor: page.NextCursor})
}

func (s *Server) getEvent(w http.ResponseWriter, r *http.Request) {
	ev, err := s.o.Audit.Get(r.Context(), identity(r).Tenant, chi.URLParam(r, "id"))
	switch {
	case errors.Is(err, audit.ErrNotFound):
		writeError(w, http.StatusNotFound, CodeNotFound, "no such event")
	case err != nil:
		s.o.Logger.Error("audit get failed", "err", err)
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "audit log is unavailable")
	default:
		writeJSON(w, http.StatusOK, ev)
	}
}

func (s *Server) verify(w http.ResponseWriter, r *http.Request) {
	res, err := s.o.Audit.Verify(r.Context(), identity(r).Tenant)
	if err != nil {
		s.o.Logger.Error("audit verify failed", "err", err)
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "audit log is unavailable")
		return
	}
	writeJSON(w, http.StatusOK, res)
}
