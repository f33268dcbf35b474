package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/service"
)

// The audit pages (role auditor): the search of the tenant's log, an
// event with its proof, the verification of the whole log, and the
// export download. Everything goes through service.Audit with the
// session's identity, so a page shows what the same credential would get
// from /v1/audit/….

// defaultAuditLimit is a page's size when the form leaves it empty.
const defaultAuditLimit = 50

// auditOutcomes are the outcomes the search offers (every outcome an
// event can carry; a value not in the list, such as an MCP definition
// event's, still works from a link).
var auditOutcomes = []string{
	string(apiv1.OutcomeAllow), string(apiv1.OutcomeDenied), string(apiv1.OutcomeApprovalRequired),
	string(apiv1.OutcomeInvalidArguments), string(apiv1.OutcomeUnavailable), string(apiv1.OutcomeRateLimited),
	string(apiv1.OutcomeError),
	string(apiv1.OutcomeOK), string(apiv1.OutcomeToolError), string(apiv1.OutcomeAwaitingUser),
	string(apiv1.OutcomeCanceled), string(apiv1.OutcomeApproved), string(apiv1.OutcomeExpired),
	string(apiv1.OutcomeAnswered), string(apiv1.OutcomePending),
}

var auditPhases = []string{
	apiv1.PhaseDecision, apiv1.PhaseResult, apiv1.PhaseApproval, apiv1.PhaseQuestion, apiv1.PhaseDefinition,
}

// auditForm is the search form as the user filled it in: the values
// are shown back and carried, unchanged, into the paging and export
// links (a cursor belongs to exactly its filters).
type auditForm struct {
	Tool, Principal, Outcome, Phase, SessionID, CallID, DecisionID string
	From, To, Limit, Cursor                                        string
	// FromInput and ToInput are From and To as a datetime-local input
	// shows them (UTC).
	FromInput, ToInput string
}

// filterParams are the query parameters of the search, in the order the
// links carry them.
var filterParams = []string{"tool", "principal", "outcome", "phase", "session_id", "call_id", "decision_id", "from", "to", "limit"}

func readAuditForm(q url.Values) auditForm {
	f := auditForm{
		Tool: q.Get("tool"), Principal: q.Get("principal"), Outcome: q.Get("outcome"), Phase: q.Get("phase"),
		SessionID: q.Get("session_id"), CallID: q.Get("call_id"), DecisionID: q.Get("decision_id"),
		From: strings.TrimSpace(q.Get("from")), To: strings.TrimSpace(q.Get("to")),
		Limit: strings.TrimSpace(q.Get("limit")), Cursor: q.Get("cursor"),
	}
	f.FromInput, f.ToInput = f.From, f.To
	return f
}

func (f auditForm) value(param string) string {
	switch param {
	case "tool":
		return f.Tool
	case "principal":
		return f.Principal
	case "outcome":
		return f.Outcome
	case "phase":
		return f.Phase
	case "session_id":
		return f.SessionID
	case "call_id":
		return f.CallID
	case "decision_id":
		return f.DecisionID
	case "from":
		return f.From
	case "to":
		return f.To
	case "limit":
		return f.Limit
	}
	return ""
}

// query is the search's non-empty filters (no cursor) as a query string.
func (f auditForm) query() url.Values {
	v := url.Values{}
	for _, p := range filterParams {
		if s := f.value(p); s != "" {
			v.Set(p, s)
		}
	}
	return v
}

// Layouts a time field accepts, all read as UTC: what a datetime-local
// input sends (with or without seconds and milliseconds), then RFC 3339
// with its own offset (links from elsewhere, the API's form).
var timeLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05Z"}

// parseWhen reads a time field ("" is no bound).
func parseWhen(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, true
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, true
	}
	for _, l := range timeLayouts {
		if t, err := time.ParseInLocation(l, s, time.UTC); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// inputTime is t as a datetime-local input's value, in UTC.
func inputTime(t time.Time) string {
	t = t.UTC()
	if t.Nanosecond() >= int(time.Millisecond) {
		return t.Format("2006-01-02T15:04:05.000")
	}
	return t.Format("2006-01-02T15:04:05")
}

// window reads the from and to fields; problems are whole sentences that
// name the field, never the text typed into it.
func readWindow(fromText, toText string) (from, to time.Time, problems []string) {
	from, okFrom := parseWhen(fromText)
	to, okTo := parseWhen(toText)
	if !okFrom {
		problems = append(problems, "From is not a date and time: use the picker, or write YYYY-MM-DDTHH:MM (seconds optional), in UTC.")
	}
	if !okTo {
		problems = append(problems, "To is not a date and time: use the picker, or write YYYY-MM-DDTHH:MM (seconds optional), in UTC.")
	}
	if okFrom && okTo && !from.IsZero() && !to.IsZero() && from.After(to) {
		problems = append(problems, "From ("+from.UTC().Format("2006-01-02 15:04:05Z")+") is after To ("+
			to.UTC().Format("2006-01-02 15:04:05Z")+"): no event can match. Swap them or widen the window.")
	}
	return from, to, problems
}

// filter validates the form into the service's filter. A non-empty
// problem means no query may run.
func (f *auditForm) filter() (service.AuditFilter, string) {
	flt := service.AuditFilter{
		Tool: f.Tool, Principal: f.Principal, Outcome: f.Outcome, Phase: f.Phase,
		SessionID: f.SessionID, CallID: f.CallID, DecisionID: f.DecisionID,
		Cursor: f.Cursor, Limit: defaultAuditLimit,
	}
	from, to, problems := readWindow(f.From, f.To)
	if !from.IsZero() {
		f.FromInput = inputTime(from)
	}
	if !to.IsZero() {
		f.ToInput = inputTime(to)
	}
	flt.From, flt.To = from, to
	if f.Limit != "" {
		n, err := strconv.Atoi(f.Limit)
		if err != nil || n < 1 || n > 1000 {
			problems = append(problems, "Limit must be a whole number from 1 to 1000.")
		} else {
			flt.Limit = n
		}
	}
	return flt, strings.Join(problems, " ")
}

// option is an entry of a select.
type option struct {
	Value, Label string
	Selected     bool
}

// options lists values, "any" first, with the current one selected; a
// current value not in the list is added so that it is not lost.
func options(values []string, current string) []option {
	out := []option{{Value: "", Label: "any", Selected: current == ""}}
	found := current == ""
	for _, v := range values {
		out = append(out, option{Value: v, Label: v, Selected: v == current})
		found = found || v == current
	}
	if !found {
		out = append(out, option{Value: current, Label: current, Selected: true})
	}
	return out
}

// auditView is the data of the audit page.
type auditView struct {
	Form              auditForm
	Outcomes, Phases  []option
	Ran               bool // the query ran (Events is its answer)
	Events            []*apiv1.AuditEvent
	Older, Newest     string // paging links ("" when there is none)
	Export, ExportOPA string
	VerifyAction      string
	Verify            *verifyView
	// Window says which time window the export covers.
	Window string
}

// verifyView is the answer of the verify button.
type verifyView struct {
	Result service.VerifyResult
}

func (s *Server) auditList(w http.ResponseWriter, r *http.Request) {
	s.auditPage(w, r, nil)
}

// auditPage renders the search with the request's filters and, after
// the verify button, its result.
func (s *Server) auditPage(w http.ResponseWriter, r *http.Request, verify *verifyView) {
	form := readAuditForm(r.URL.Query())
	flt, problem := form.filter()
	v := auditView{
		Form: form, Outcomes: options(auditOutcomes, form.Outcome), Phases: options(auditPhases, form.Phase),
		Verify: verify,
	}
	base := form.query()
	v.VerifyAction = Prefix + "/audit/verify"
	if len(base) > 0 {
		v.VerifyAction += "?" + base.Encode()
	}
	// The export covers a time window of the whole log: the other
	// filters do not apply to it.
	if problem == "" {
		exp := url.Values{}
		for _, p := range []string{"from", "to"} {
			if s := form.value(p); s != "" {
				exp.Set(p, s)
			}
		}
		switch {
		case form.From != "" && form.To != "":
			v.Window = "from " + inputTime(flt.From) + " to " + inputTime(flt.To) + " UTC"
		case form.From != "":
			v.Window = "from " + inputTime(flt.From) + " UTC on"
		case form.To != "":
			v.Window = "up to " + inputTime(flt.To) + " UTC"
		}
		exp.Set("format", apiv1.ExportNDJSON)
		v.Export = Prefix + "/audit/export?" + exp.Encode()
		exp.Set("format", apiv1.ExportOPA)
		v.ExportOPA = Prefix + "/audit/export?" + exp.Encode()
	}
	page := view{Title: "Audit log", Active: "audit", Data: &v}
	if problem != "" {
		page.Problem = problem
		s.render(w, r, http.StatusBadRequest, "audit", page)
		return
	}
	res, err := s.o.Services.Audit.Events(r.Context(), caller(r), flt)
	if err != nil {
		if e := service.As(err); e.Kind == service.KindInvalid {
			// A stale or edited cursor: say so on the search page.
			page.Problem = "The search could not run: " + e.Message + ". Start again from the newest events."
			s.render(w, r, http.StatusBadRequest, "audit", page)
			return
		}
		s.serviceFailure(w, r, err)
		return
	}
	v.Ran, v.Events = true, res.Events
	if res.NextCursor != "" {
		next := form.query()
		next.Set("cursor", res.NextCursor)
		v.Older = Prefix + "/audit?" + next.Encode()
	}
	if form.Cursor != "" {
		v.Newest = Prefix + "/audit"
		if len(base) > 0 {
			v.Newest += "?" + base.Encode()
		}
	}
	s.render(w, r, http.StatusOK, "audit", page)
}

// auditVerify recomputes the tenant's log (hash chain, tree, latest
// checkpoint) and shows the result on the search page. It is a POST
// because it reads the whole log.
func (s *Server) auditVerify(w http.ResponseWriter, r *http.Request) {
	res, err := s.o.Services.Audit.Verify(r.Context(), caller(r))
	if err != nil {
		s.serviceFailure(w, r, err)
		return
	}
	if !res.OK {
		s.o.Logger.Warn("console: the audit log does not verify", "tenant", caller(r).Tenant,
			"principal", caller(r).Principal, "first_bad_event", res.FirstBadEvent, "problem", res.Problem)
	}
	s.auditPage(w, r, &verifyView{Result: res})
}

// eventView is the data of an event's page.
type eventView struct {
	Ev          *apiv1.AuditEvent
	HasDecision bool
	Proof       service.EventProof
	// Others are the events of the same call, newest first (this one
	// included); OthersMore links to all of them when there are more.
	Others     []*apiv1.AuditEvent
	OthersMore bool
}

// maxCallEvents bounds the events of one call shown on an event's page.
const maxCallEvents = 100

func (s *Server) auditEvent(w http.ResponseWriter, r *http.Request) {
	id := caller(r)
	ev, err := s.o.Services.Audit.Event(r.Context(), id, chi.URLParam(r, "id"))
	if err != nil {
		s.serviceFailure(w, r, err)
		return
	}
	v := eventView{Ev: ev, HasDecision: ev.Decision != nil}
	v.Proof, err = s.o.Services.Audit.ProveEvent(r.Context(), id, ev)
	if err != nil {
		v.Proof = service.EventProof{Status: service.ProofUnavailable, Reason: service.As(err).Message}
	}
	page := view{Title: "Audit event", Active: "audit", Data: &v}
	if ev.CallID != "" {
		others, err := s.o.Services.Audit.Events(r.Context(), id, service.AuditFilter{CallID: ev.CallID, Limit: maxCallEvents})
		if err != nil {
			page.Problem = "The other events of this call could not be read: " + service.As(err).Message + "."
		} else {
			v.Others, v.OthersMore = others.Events, others.NextCursor != ""
		}
	}
	s.render(w, r, http.StatusOK, "event", page)
}
