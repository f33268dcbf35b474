package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/service"
)

// pageNames are the templates under templates/ that render a whole page
// inside layout.html.
var pageNames = []string{"error", "login", "overview", "audit", "event", "approvals", "questions", "policy"}

func parsePages() (map[string]*template.Template, error) {
	out := make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

var funcs = template.FuncMap{
	// pretty is indented JSON of any value (request documents, decisions).
	"pretty": func(v any) string {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return fmt.Sprint(v)
		}
		return strings.TrimSuffix(b.String(), "\n")
	},
	// when renders an RFC 3339 time as UTC to the second.
	"when": func(v any) string {
		switch t := v.(type) {
		case time.Time:
			if t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04:05Z")
		case string:
			if p, err := time.Parse(time.RFC3339Nano, t); err == nil {
				return p.UTC().Format("2006-01-02 15:04:05Z")
			}
			return t
		}
		return fmt.Sprint(v)
	},
	// short abbreviates a digest or id for tables (the full value is in
	// the title attribute and on the detail page).
	"short": func(s string) string {
		if i := strings.IndexByte(s, ':'); i >= 0 && len(s)-i > 13 {
			return s[:i+13] + "…"
		}
		if len(s) > 16 {
			return s[:16] + "…"
		}
		return s
	},
	"join": strings.Join,
}

// view is what every page template gets.
type view struct {
	Title   string
	Active  string // the navigation entry of this page
	Nav     []navItem
	Signed  bool
	Tenant  string
	Who     string
	Roles   []string
	Method  string
	CSRF    string
	Version string
	Notice  string // a success message
	Problem string // an error message shown above the page
	Data    any
}

type navItem struct {
	Key, Label, Href string
}

// nav is the navigation a credential may use: pages it has no role for
// are not shown.
func nav(r *http.Request) []navItem {
	id := caller(r)
	items := []navItem{{"overview", "Overview", Prefix + "/"}}
	if id.HasRole(identity.RoleAuditor) {
		items = append(items, navItem{"audit", "Audit log", Prefix + "/audit"})
	}
	if id.HasRole(identity.RoleApprover) {
		items = append(items, navItem{"approvals", "Approvals", Prefix + "/approvals"})
	} else {
		// Approvers answer questions on the approvals page; everyone else
		// (an agent's user answering its ask-user questions) here.
		items = append(items, navItem{"questions", "Questions", Prefix + "/questions"})
	}
	if id.HasRole(identity.RolePolicyAdmin) {
		items = append(items, navItem{"policy", "Policy", Prefix + "/policy"})
	}
	return items
}

// render writes page with data, filling the layout from the session.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, page string, v view) {
	t := s.pages[page]
	if t == nil {
		panic("console: no template " + page)
	}
	v.Version = s.o.Version
	if sess, id := current(r), caller(r); sess != nil && id != nil {
		v.Signed = true
		v.Tenant, v.Who, v.Roles, v.Method = id.Tenant, id.Principal, id.Roles, sess.method
		v.CSRF = sess.csrf
		v.Nav = nav(r)
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "layout.html", v); err != nil {
		s.o.Logger.Error("console: rendering failed", "page", page, "err", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

// fail renders the error page with a safe message.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	s.render(w, r, status, "error", view{Title: http.StatusText(status), Problem: msg, Data: status})
}

// serviceFailure renders a service error as a page: its kind's status
// and its safe message.
func (s *Server) serviceFailure(w http.ResponseWriter, r *http.Request, err error) {
	e := service.As(err)
	s.fail(w, r, e.Kind.HTTPStatus(), e.Message)
}
