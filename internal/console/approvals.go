package console

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/service"
)

// The bounds of the approvals page's forms, the REST API's own: a comment
// on an approval step, an answer to a question (bytes of UTF-8).
const (
	maxComment = 1000
	maxAnswer  = 4000
)

// How much of each list the approvals page shows.
const (
	pendingShown   = 100
	questionsShown = 100
	decidedShown   = 25
)

// approvalsDone are the notices a redirect after a step may ask for
// (?done=…): fixed texts, never the query's own.
var approvalsDone = map[string]string{
	"approved": "Approved. The held call ran as it was held; its result is under Recently decided.",
	"denied":   "Denied. The held call will not run; its caller learns that it was denied.",
	"answered": "Answer recorded. The waiting call has it as its result.",
}

// approvalsView is the approvals page's data.
type approvalsView struct {
	Pending   []pendingApproval
	Questions []pendingQuestion
	Decided   []apiv1.Approval
	// Auditor: the viewer may open the audit log, so call ids link to it.
	Auditor bool
	// MaxComment and MaxAnswer bound the form fields (bytes).
	MaxComment, MaxAnswer int
}

type pendingApproval struct {
	apiv1.Approval
	Left string // time until it expires
}

type pendingQuestion struct {
	service.PendingQuestion
	Left string
	Mine bool // the viewer asked it
}

// approvalsPage lists the tenant's held calls waiting for a decision, the
// questions the viewer may answer, and the recently decided held calls.
func (s *Server) approvalsPage(w http.ResponseWriter, r *http.Request) {
	s.renderApprovals(w, r, http.StatusOK, approvalsDone[r.URL.Query().Get("done")], "")
}

// renderApprovals renders the approvals page with a notice or problem;
// a failure to list becomes the service's error page.
func (s *Server) renderApprovals(w http.ResponseWriter, r *http.Request, status int, notice, problem string) {
	ctx, id := r.Context(), caller(r)
	pending, err := s.o.Services.Approvals.Approvals(ctx, id, service.ApprovalFilter{Status: apiv1.ApprovalPending, Limit: pendingShown})
	if err != nil {
		s.failService(w, r, err)
		return
	}
	questions, err := s.o.Services.Approvals.Questions(ctx, id, service.QuestionFilter{Limit: questionsShown})
	if err != nil {
		s.failService(w, r, err)
		return
	}
	// The newest decisions of each kind, merged: one list of every status
	// could be filled by pending ones alone.
	var decided []apiv1.Approval
	for _, st := range []string{apiv1.ApprovalApproved, apiv1.ApprovalDenied, apiv1.ApprovalExpired} {
		l, err := s.o.Services.Approvals.Approvals(ctx, id, service.ApprovalFilter{Status: st, Limit: decidedShown})
		if err != nil {
			s.failService(w, r, err)
			return
		}
		decided = append(decided, l...)
	}
	slices.SortStableFunc(decided, func(a, b apiv1.Approval) int {
		return cmp.Or(parseTime(b.DecidedAt).Compare(parseTime(a.DecidedAt)), strings.Compare(b.ID, a.ID))
	})
	if len(decided) > decidedShown {
		decided = decided[:decidedShown]
	}

	now := s.o.Now()
	v := approvalsView{Decided: decided, Auditor: id.HasRole(identity.RoleAuditor), MaxComment: maxComment, MaxAnswer: maxAnswer}
	for _, a := range pending {
		v.Pending = append(v.Pending, pendingApproval{Approval: a, Left: until(now, a.ExpiresAt)})
	}
	for _, q := range questions {
		v.Questions = append(v.Questions, pendingQuestion{PendingQuestion: q, Left: until(now, q.ExpiresAt), Mine: q.Principal == id.Principal})
	}
	s.render(w, r, status, "approvals", view{Title: "Approvals", Active: "approvals", Notice: notice, Problem: problem, Data: v})
}

func (s *Server) approve(w http.ResponseWriter, r *http.Request) { s.decide(w, r, true) }

func (s *Server) deny(w http.ResponseWriter, r *http.Request) { s.decide(w, r, false) }

// decide approves or denies a held call through the Approvals service,
// exactly as POST /v1/approvals/{id}/approve and /deny: approving runs
// the call, once, with the approver's identity and comment.
func (s *Server) decide(w http.ResponseWriter, r *http.Request, approve bool) {
	verb, done := "Not denied", "denied"
	if approve {
		verb, done = "Not approved", "approved"
	}
	comment, ok := formText(r, "comment")
	if !ok || len(comment) > maxComment {
		s.renderApprovals(w, r, http.StatusBadRequest, "",
			fmt.Sprintf("%s: the comment must be at most %d bytes of text. Nothing was changed.", verb, maxComment))
		return
	}
	step := s.o.Services.Approvals.Deny
	if approve {
		step = s.o.Services.Approvals.Approve
	}
	if _, err := step(r.Context(), service.ApprovalStep{Identity: caller(r), ID: chi.URLParam(r, "id"), Comment: comment}); err != nil {
		s.stepFailed(w, r, verb, err)
		return
	}
	http.Redirect(w, r, Prefix+"/approvals?done="+done, http.StatusSeeOther)
}

// answer answers an ask-user question through the Approvals service,
// exactly as POST /v1/questions/{id}/answer: any signed-in user may try;
// the service decides whether this principal may answer this question.
func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	// Approvers answer on the approvals page, everyone else on the
	// questions page: back to the page the form was on.
	back, page := Prefix+"/questions", s.renderQuestions
	if caller(r).HasRole(identity.RoleApprover) {
		back, page = Prefix+"/approvals", s.renderApprovals
	}
	text, ok := formText(r, "answer")
	if !ok || text == "" || len(text) > maxAnswer {
		page(w, r, http.StatusBadRequest, "", fmt.Sprintf("Not answered: an answer is 1 to %d bytes of text; choose or write one. Nothing was changed.", maxAnswer))
		return
	}
	_, err := s.o.Services.Approvals.Answer(r.Context(), service.AnswerStep{Identity: caller(r), ID: chi.URLParam(r, "id"), Answer: text})
	if err != nil {
		e := service.As(err)
		switch e.Kind {
		case service.KindInvalid, service.KindForbidden, service.KindNotFound, service.KindConflict:
			page(w, r, e.Kind.HTTPStatus(), "", fmt.Sprintf("Not answered: %s. Nothing was changed.", strings.TrimSuffix(e.Message, ".")))
		default:
			s.failService(w, r, err)
		}
		return
	}
	http.Redirect(w, r, back+"?done=answered", http.StatusSeeOther)
}

// questionsPage lists the questions the viewer may answer (its own, and
// others' when policy lets it answer for them), for anyone signed in.
func (s *Server) questionsPage(w http.ResponseWriter, r *http.Request) {
	s.renderQuestions(w, r, http.StatusOK, approvalsDone[r.URL.Query().Get("done")], "")
}

func (s *Server) renderQuestions(w http.ResponseWriter, r *http.Request, status int, notice, problem string) {
	ctx, id := r.Context(), caller(r)
	questions, err := s.o.Services.Approvals.Questions(ctx, id, service.QuestionFilter{Limit: questionsShown})
	if err != nil {
		s.failService(w, r, err)
		return
	}
	now := s.o.Now()
	v := approvalsView{Auditor: id.HasRole(identity.RoleAuditor), MaxComment: maxComment, MaxAnswer: maxAnswer}
	for _, q := range questions {
		v.Questions = append(v.Questions, pendingQuestion{PendingQuestion: q, Left: until(now, q.ExpiresAt), Mine: q.Principal == id.Principal})
	}
	s.render(w, r, status, "questions", view{Title: "Questions", Active: "questions", Notice: notice, Problem: problem, Data: v})
}

// stepFailed shows why a step did nothing: the approvals page again with
// the service's safe message and its kind's status for what the user can
// act on (a bad form, not allowed, gone, already decided); the error page
// for the rest.
func (s *Server) stepFailed(w http.ResponseWriter, r *http.Request, verb string, err error) {
	e := service.As(err)
	switch e.Kind {
	case service.KindInvalid, service.KindForbidden, service.KindNotFound, service.KindConflict:
		s.renderApprovals(w, r, e.Kind.HTTPStatus(), "", fmt.Sprintf("%s: %s. Nothing was changed.", verb, strings.TrimSuffix(e.Message, ".")))
	default:
		s.failService(w, r, err)
	}
}

// failService logs a server-side failure (never shown) and renders the
// service error page.
func (s *Server) failService(w http.ResponseWriter, r *http.Request, err error) {
	if e := service.As(err); e.Kind.HTTPStatus() >= 500 {
		s.o.Logger.Error("console: approvals", "path", r.URL.Path, "err", err)
	}
	s.serviceFailure(w, r, err)
}

// formText is a form field given at most once, as UTF-8 text with the
// browser's CRLF line breaks made LF ("" when absent).
func formText(r *http.Request, name string) (string, bool) {
	vs := r.PostForm[name]
	switch {
	case len(vs) == 0:
		return "", true
	case len(vs) > 1 || !utf8.ValidString(vs[0]):
		return "", false
	}
	return strings.ReplaceAll(vs[0], "\r\n", "\n"), true
}

// until says how long until an RFC 3339 time, to the minute.
func until(now time.Time, at string) string {
	t := parseTime(at)
	if t.IsZero() {
		return ""
	}
	d := t.Sub(now)
	switch {
	case d <= 0:
		return "expired"
	case d < time.Minute:
		return "in less than a minute"
	case d < time.Hour:
		return fmt.Sprintf("in %d min", int(d/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("in %d h %d min", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("in %d days", int(d/(24*time.Hour)))
}

// parseTime reads an RFC 3339 time of the wire types (zero when absent).
func parseTime(v string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}
	}
	return t
}
