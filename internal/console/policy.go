package console

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/service"
)

// The policy page (policy-admin): what serves, how the shadow policy
// compares, a playground that evaluates without effect, and replay of a
// candidate against the audited past. Evaluation and replay change
// nothing, so their results are rendered in place, not redirected to.
const (
	// policyWindow is the default look-back of replay and of the shadow
	// counts.
	policyWindow = 24 * time.Hour
	// shadowMaxEvents bounds the decision events the shadow counts read.
	shadowMaxEvents = 5000
	// replayListed is how many changed decisions a replay lists.
	replayListed = 200
	// moduleSlots is how many empty module fields the replay form offers.
	moduleSlots = 3
)

// sessionIDRE is the REST API's id syntax (internal/api idRE).
var sessionIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$`)

type policyData struct {
	Info     apiv1.PolicyInfo
	CanAudit bool // event ids link to the audit pages

	Shadow        *service.ShadowSummary
	ShadowProblem string
	ShadowFrom    time.Time

	Explains []explainOption
	Eval     evalForm
	// EvalProblem is why the form was not evaluated (status 400).
	EvalProblem string
	Result      *evalView

	Replay        replayForm
	ReplayProblem string
	Report        *replayView
}

type explainOption struct{ Value, Label string }

var explainLevels = []explainOption{
	{"", "none"},
	{"notes", "notes (print and trace notes)"},
	{"fails", "fails (the expressions that failed)"},
	{"full", "full (the whole trace)"},
}

// evalForm is the playground's input, kept as typed.
type evalForm struct {
	Mode      string // "call" or "document"
	Tool      string
	Principal string
	Roles     string
	Groups    string
	SessionID string
	Arguments string
	Document  string
	Explain   string
}

type evalView struct {
	apiv1.PolicyEvalResponse
	Obligations any    // the decision's obligations, nil when none
	Explained   string // the explanation's lines
}

type replayForm struct {
	Candidate string // "modules" or "shadow"
	Modules   []moduleSlot
	Data      string
	From, To  string
}

type moduleSlot struct {
	N            int
	Name, Source string
}

type replayView struct {
	*service.ReplayReport
	From, To   time.Time
	Directions []directionRow
	Tools      []toolChanges
	Listed     int
}

type directionRow struct {
	Key, From, To string
	Count         int
}

type toolChanges struct {
	Tool       string
	Changed    int
	Directions string
}

func (s *Server) policyPage(w http.ResponseWriter, r *http.Request) {
	s.renderPolicy(w, r, http.StatusOK, &policyData{Eval: defaultEval(), Replay: s.defaultReplay()})
}

// renderPolicy fills what every rendering of the page shows (revision,
// modules, shadow counts) and renders it.
func (s *Server) renderPolicy(w http.ResponseWriter, r *http.Request, status int, d *policyData) {
	ctx, id := r.Context(), caller(r)
	svc := s.o.Services.Policy
	info, err := svc.Info(ctx, id)
	if err != nil {
		s.failService(w, r, err)
		return
	}
	d.Info = info
	d.CanAudit = id.HasRole(identity.RoleAuditor)
	d.Explains = explainLevels
	d.ShadowFrom = s.o.Now().Add(-policyWindow)
	sum, err := svc.ShadowSummary(ctx, service.ShadowRequest{Admin: id, From: d.ShadowFrom, Max: shadowMaxEvents})
	if err != nil {
		d.ShadowProblem = service.As(err).Message
	} else {
		d.Shadow = &sum
	}
	d.Replay.Modules = withEmptySlots(d.Replay.Modules)
	s.render(w, r, status, "policy", view{Title: "Policy", Active: "policy", Data: d})
}

func defaultEval() evalForm { return evalForm{Mode: "call", Arguments: "{}"} }

func (s *Server) defaultReplay() replayForm {
	return replayForm{Candidate: "modules", From: s.o.Now().Add(-policyWindow).UTC().Format(time.RFC3339)}
}

// withEmptySlots keeps the filled module fields and adds empty ones: at
// least one, and moduleSlots fields in all.
func withEmptySlots(filled []moduleSlot) []moduleSlot {
	out := make([]moduleSlot, 0, len(filled)+moduleSlots)
	for _, m := range filled {
		if m.Name != "" || strings.TrimSpace(m.Source) != "" {
			out = append(out, m)
		}
	}
	for want := max(moduleSlots, len(out)+1); len(out) < want; {
		out = append(out, moduleSlot{})
	}
	for i := range out {
		out[i].N = i + 1
	}
	return out
}

// policyEval evaluates the playground's would-be call or request document
// with the current revision: no effect, no audit event.
func (s *Server) policyEval(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	in := evalForm{
		Mode: f.Get("mode"), Tool: strings.TrimSpace(f.Get("tool")), Principal: strings.TrimSpace(f.Get("principal")),
		Roles: f.Get("roles"), Groups: f.Get("groups"), SessionID: strings.TrimSpace(f.Get("session_id")),
		Arguments: f.Get("arguments"), Document: f.Get("document"), Explain: f.Get("explain"),
	}
	d := &policyData{Eval: in, Replay: s.defaultReplay()}
	req, msg := in.request(caller(r))
	if msg != "" {
		d.EvalProblem = msg
		s.renderPolicy(w, r, http.StatusBadRequest, d)
		return
	}
	res, err := s.o.Services.Policy.Evaluate(r.Context(), req)
	if err != nil {
		e := service.As(err)
		d.EvalProblem = e.Message
		s.renderPolicy(w, r, e.Kind.HTTPStatus(), d)
		return
	}
	v := &evalView{PolicyEvalResponse: res, Explained: strings.Join(res.Explanation, "\n")}
	if dec, ok := res.Decision.(map[string]any); ok {
		if o, ok := dec["obligations"]; ok && !emptyJSON(o) {
			v.Obligations = o
		}
	}
	d.Result = v
	s.renderPolicy(w, r, http.StatusOK, d)
}

// request is the evaluation the form asks for, or why it cannot be made
// (the REST API's checks, in the form's words where its shape differs).
func (f evalForm) request(admin *identity.Identity) (service.EvalRequest, string) {
	req := service.EvalRequest{Admin: admin, Explain: f.Explain}
	if !service.ValidExplain(f.Explain) {
		return req, "explain must be notes, fails or full"
	}
	switch f.Mode {
	case "document":
		v, msg := parseJSON("the request document is", f.Document)
		if msg != "" {
			return req, msg
		}
		if v.Kind() != '{' {
			return req, "the request document must be a JSON object"
		}
		var doc map[string]any
		if err := json.Unmarshal(v, &doc); err != nil {
			return req, "the request document is not valid JSON: " + err.Error()
		}
		req.Document = doc
	case "call":
		if f.Tool == "" || f.Principal == "" {
			return req, "a would-be call needs a tool and a principal id (or evaluate a raw request document)"
		}
		if f.SessionID != "" && !sessionIDRE.MatchString(f.SessionID) {
			return req, "session_id must be 1-128 characters of letters, digits and ._:@-"
		}
		if strings.TrimSpace(f.Arguments) != "" {
			v, msg := parseJSON("the arguments are", f.Arguments)
			if msg != "" {
				return req, msg
			}
			req.Arguments = v
		}
		req.Tool, req.SessionID = f.Tool, f.SessionID
		req.As = &identity.Identity{Principal: f.Principal, Roles: words(f.Roles), Groups: words(f.Groups)}
	default:
		return req, "choose what to evaluate: a would-be call or a raw request document"
	}
	return req, ""
}

// parseJSON checks text is one JSON value, decoded as strictly as an API
// body (duplicate names, invalid UTF-8 and trailing data are errors); msg
// says where it is not. what names the field with its verb ("the
// arguments are").
func parseJSON(what, text string) (v jsontext.Value, msg string) {
	b := []byte(strings.TrimSpace(text))
	if len(b) == 0 {
		return nil, what + " empty"
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, what + " not valid JSON: " + strings.TrimPrefix(err.Error(), "jsontext: ")
	}
	return v, ""
}

// words splits a list typed with commas or spaces.
func words(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' })
}

func emptyJSON(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// policyReplay replays the tenant's audited decisions of a window against
// a candidate: the configured shadow policy or the modules pasted in the
// form. It changes nothing.
func (s *Server) policyReplay(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	in := replayForm{Candidate: f.Get("candidate"), Data: f.Get("data"), From: strings.TrimSpace(f.Get("from")), To: strings.TrimSpace(f.Get("to"))}
	names, sources := f["module_name"], f["module_source"]
	for i := range max(len(names), len(sources)) {
		var m moduleSlot
		if i < len(names) {
			m.Name = strings.TrimSpace(names[i])
		}
		if i < len(sources) {
			m.Source = sources[i]
		}
		in.Modules = append(in.Modules, m)
	}
	d := &policyData{Eval: defaultEval(), Replay: in}
	req, msg := s.replayRequest(in, caller(r))
	if msg != "" {
		d.ReplayProblem = msg
		s.renderPolicy(w, r, http.StatusBadRequest, d)
		return
	}
	rep, err := s.o.Services.Policy.Replay(r.Context(), req)
	if err != nil {
		e := service.As(err)
		d.ReplayProblem = e.Message
		s.renderPolicy(w, r, e.Kind.HTTPStatus(), d)
		return
	}
	d.Report = newReplayView(rep, req.From, req.To)
	s.renderPolicy(w, r, http.StatusOK, d)
}

func (s *Server) replayRequest(in replayForm, admin *identity.Identity) (service.ReplayRequest, string) {
	req := service.ReplayRequest{Admin: admin, From: s.o.Now().Add(-policyWindow), Changes: replayListed}
	for _, tb := range []struct {
		name, v string
		dst     *time.Time
	}{{"from", in.From, &req.From}, {"to", in.To, &req.To}} {
		if tb.v == "" {
			continue
		}
		t, ok := parseFormTime(tb.v)
		if !ok {
			return req, tb.name + " must be an RFC 3339 time"
		}
		*tb.dst = t
	}
	if !req.To.IsZero() && req.From.After(req.To) {
		return req, "from must not be after to"
	}
	switch in.Candidate {
	case "shadow":
		req.Shadow = true
		return req, ""
	case "modules":
	default:
		return req, "choose a candidate: the shadow policy or pasted modules"
	}
	req.Modules = map[string]string{}
	n := 0 // the field's number as the page shows it again (blank ones dropped)
	for _, m := range in.Modules {
		if m.Name == "" && strings.TrimSpace(m.Source) == "" {
			continue
		}
		n++
		switch {
		case m.Name == "":
			return req, fmt.Sprintf("module %d needs a file name (e.g. authz.rego)", n)
		case strings.TrimSpace(m.Source) == "":
			return req, fmt.Sprintf("module %s has no source", m.Name)
		}
		if _, dup := req.Modules[m.Name]; dup {
			return req, fmt.Sprintf("module %s is given twice", m.Name)
		}
		req.Modules[m.Name] = m.Source
	}
	if len(req.Modules) == 0 {
		return req, "paste at least one module, or choose the shadow policy"
	}
	if strings.TrimSpace(in.Data) != "" {
		v, msg := parseJSON("data is", in.Data)
		if msg != "" {
			return req, msg
		}
		if v.Kind() != '{' {
			return req, "data must be a JSON object"
		}
		if err := json.Unmarshal(v, &req.Data); err != nil {
			return req, "data is not valid JSON: " + err.Error()
		}
	}
	return req, ""
}

// parseFormTime reads an RFC 3339 time, or what a datetime-local field sends
// (taken as UTC).
func parseFormTime(s string) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, true
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

func newReplayView(rep *service.ReplayReport, from, to time.Time) *replayView {
	v := &replayView{ReplayReport: rep, From: from, To: to, Listed: len(rep.Changes)}
	for _, k := range rep.Directions() {
		g := rep.ByDirection[k]
		old, now, _ := strings.Cut(k, "_to_")
		v.Directions = append(v.Directions, directionRow{Key: k, From: old, To: now, Count: g.Count})
	}
	for tool, tg := range rep.ByTool {
		parts := make([]string, 0, len(tg.ByDirection))
		for k, n := range tg.ByDirection {
			old, now, _ := strings.Cut(k, "_to_")
			parts = append(parts, old+" → "+now+" "+strconv.Itoa(n))
		}
		slices.Sort(parts)
		v.Tools = append(v.Tools, toolChanges{Tool: tool, Changed: tg.Changed, Directions: strings.Join(parts, ", ")})
	}
	slices.SortFunc(v.Tools, func(a, b toolChanges) int {
		if a.Changed != b.Changed {
			return b.Changed - a.Changed
		}
		return strings.Compare(a.Tool, b.Tool)
	})
	return v
}
