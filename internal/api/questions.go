package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/service"
)

// listQuestions answers GET /v1/questions?limit=: the pending ask-user
// questions the caller may answer (its own, and others' of its tenant
// when policy lets it answer for them), newest first.
func (s *Server) listQuestions(w http.ResponseWriter, r *http.Request) {
	f := service.QuestionFilter{Limit: service.ApprovalsDefaultLimit}
	for k, vs := range r.URL.Query() {
		if len(vs) > 1 {
			writeError(w, badRequest("query parameter %s given more than once", strconv.Quote(k)))
			return
		}
		if k != "limit" {
			writeError(w, badRequest("unknown query parameter %s", strconv.Quote(truncate(k, 64))))
			return
		}
		n, err := strconv.Atoi(vs[0])
		if err != nil || n < 1 { // the service checks the most
			writeError(w, badRequest("limit must be an integer from 1 to 1000"))
			return
		}
		f.Limit = n
	}
	l, err := s.o.Approvals.Questions(r.Context(), caller(r), f)
	if err != nil {
		writeError(w, err)
		return
	}
	if l == nil {
		l = []service.PendingQuestion{}
	}
	writeJSON(w, http.StatusOK, apiv1.QuestionList{Questions: l})
}

// answerQuestion answers POST /v1/questions/{id}/answer {"answer": "..."}.
func (s *Server) answerQuestion(w http.ResponseWriter, r *http.Request) {
	body, rerr := readBody(w, r, s.o.MaxBodyBytes)
	var answer string
	if rerr == nil {
		answer, rerr = decodeAnswer(body)
	}
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	q, err := s.o.Approvals.Answer(r.Context(), service.AnswerStep{Identity: caller(r), ID: chi.URLParam(r, "id"), Answer: answer})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, q)
}

// decodeAnswer reads {"answer": "..."} strictly.
func decodeAnswer(body []byte) (string, *requestError) {
	var in apiv1.AnswerRequest
	if err := json.Unmarshal(body, &in, json.RejectUnknownMembers(true)); err != nil || !hasMember(body, "answer") {
		return "", badRequest("body must be a JSON object with one string member \"answer\"")
	}
	return in.Answer, nil
}

// callStatus answers GET /v1/calls/{call_id}?wait=: the original caller
// polls a held call or an ask-user question, optionally long-polling up
// to service.MaxPollWait while it is pending.
func (s *Server) callStatus(w http.ResponseWriter, r *http.Request) {
	var wait time.Duration
	for k, vs := range r.URL.Query() {
		if k != "wait" || len(vs) > 1 {
			writeError(w, badRequest("the only query parameter is wait, given once"))
			return
		}
		d, ok := parseWait(vs[0])
		if !ok {
			writeError(w, badRequest("wait must be a duration from 0s to 60s (e.g. 30s) or whole seconds"))
			return
		}
		wait = d
	}
	st, err := s.o.Approvals.CallStatus(r.Context(), caller(r), chi.URLParam(r, "call_id"), wait)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// hasMember reports whether the JSON object body has a member name (so
// that an absent required string is told from an empty one).
func hasMember(body []byte, name string) bool {
	var m map[string]jsontext.Value
	if json.Unmarshal(body, &m) != nil {
		return false
	}
	_, ok := m[name]
	return ok
}

// parseWait reads a Go duration ("30s", "1m") or whole seconds ("30").
func parseWait(v string) (time.Duration, bool) {
	d, err := time.ParseDuration(v)
	if err != nil {
		n, nerr := strconv.Atoi(v)
		if nerr != nil || n < 0 || n > int(service.MaxPollWait/time.Second) {
			return 0, false
		}
		d = time.Duration(n) * time.Second
	}
	return d, d >= 0 && d <= service.MaxPollWait
}
