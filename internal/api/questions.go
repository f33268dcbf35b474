package api

import (
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/approval"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/pipeline"
)

// maxAnswer bounds an answer (bytes).
const maxAnswer = 4000

// questionView is a question as its answerer sees it after answering.
type questionView = apiv1.Question

// answerQuestion answers POST /v1/questions/{id}/answer {"answer": "..."}.
func (s *Server) answerQuestion(w http.ResponseWriter, r *http.Request) {
	body, rerr := readBody(w, r, s.o.MaxBodyBytes)
	var answer string
	if rerr == nil {
		answer, rerr = decodeAnswer(body)
	}
	if rerr != nil {
		writeError(w, rerr.status, rerr.code, rerr.message)
		return
	}
	q, err := s.o.Pipeline.Answer(r.Context(), pipeline.AnswerStep{Identity: identity(r), ID: chi.URLParam(r, "id"), Answer: answer})
	switch {
	case errors.Is(err, pipeline.ErrQuestionNotFound):
		writeError(w, http.StatusNotFound, CodeNotFound, "no such question")
	case errors.Is(err, pipeline.ErrQuestionAnswered):
		writeError(w, http.StatusConflict, CodeConflict, "the question was already answered")
	case errors.Is(err, pipeline.ErrAnswerNotOffered):
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, "the answer must be exactly one of the question's options")
	case err != nil:
		writePipelineError(w, err)
	default:
		writeJSON(w, http.StatusOK, questionView{
			ID: q.ID, CallID: q.CallID, Status: q.Status, AnsweredBy: q.AnsweredBy,
			AnsweredAt: audit.FormatTime(q.AnsweredAt), ExpiresAt: audit.FormatTime(q.ExpiresAt),
		})
	}
}

// decodeAnswer reads {"answer": "..."} strictly.
func decodeAnswer(body []byte) (string, *requestError) {
	var in apiv1.AnswerRequest
	if err := json.Unmarshal(body, &in, json.RejectUnknownMembers(true)); err != nil || !hasMember(body, "answer") {
		return "", badRequest("body must be a JSON object with one string member \"answer\"")
	}
	if a := in.Answer; a == "" || len(a) > maxAnswer || !utf8.ValidString(a) {
		return "", badRequest("answer must be 1 to %d bytes of UTF-8", maxAnswer)
	}
	return in.Answer, nil
}

// callStatus answers GET /v1/calls/{call_id}?wait=: the original caller
// polls a held call or an ask-user question, optionally long-polling up
// to pipeline.MaxPollWait while it is pending.
func (s *Server) callStatus(w http.ResponseWriter, r *http.Request) {
	var wait time.Duration
	for k, vs := range r.URL.Query() {
		if k != "wait" || len(vs) > 1 {
			writeError(w, http.StatusBadRequest, CodeInvalidRequest, "the only query parameter is wait, given once")
			return
		}
		d, ok := parseWait(vs[0])
		if !ok {
			writeError(w, http.StatusBadRequest, CodeInvalidRequest, "wait must be a duration from 0s to 60s (e.g. 30s) or whole seconds")
			return
		}
		wait = d
	}
	st, err := s.o.Pipeline.PollCall(r.Context(), identity(r), chi.URLParam(r, "call_id"), wait)
	switch {
	case errors.Is(err, pipeline.ErrCallNotFound):
		writeError(w, http.StatusNotFound, CodeNotFound, "no such call")
		return
	case err != nil:
		writePipelineError(w, err)
		return
	case st.Question != nil:
		writeJSON(w, http.StatusOK, questionStatus(st.Question))
		return
	}
	a := st.Approval
	body := apiv1.CallStatus{
		CallID: a.CallID, ApprovalID: a.ID, Outcome: pipeline.CallOutcome(a),
		ExpiresAt: audit.FormatTime(a.ExpiresAt),
	}
	if a.Result != nil {
		body.Content, body.IsError = &a.Result.Content, &a.Result.IsError
		if len(a.Result.Data) > 0 {
			body.Data = a.Result.Data
		}
	}
	writeJSON(w, http.StatusOK, body)
}

// questionStatus is a polled ask-user call: pending, or ok with the
// answer as content.
func questionStatus(q *approval.Question) apiv1.CallStatus {
	body := apiv1.CallStatus{
		CallID: q.CallID, QuestionID: q.ID, Outcome: apiv1.OutcomePending,
		ExpiresAt: audit.FormatTime(q.ExpiresAt),
	}
	if q.Status == approval.QuestionAnswered {
		answer, isError := q.Answer, false
		body.Outcome, body.Content, body.IsError = apiv1.OutcomeOK, &answer, &isError
		body.Data = map[string]any{"answered_by": q.AnsweredBy, "answered_at": audit.FormatTime(q.AnsweredAt)}
	}
	return body
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
		if nerr != nil || n < 0 || n > int(pipeline.MaxPollWait/time.Second) {
			return 0, false
		}
		d = time.Duration(n) * time.Second
	}
	return d, d >= 0 && d <= pipeline.MaxPollWait
}
