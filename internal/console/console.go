// Package console is the gateway's web console at /console: pages for
// auditors (the audit log), approvers (held calls and questions) and
// policy authors (revision, playground, replay), rendered on the server
// from html/template with every asset embedded, so it works offline under
// a strict Content-Security-Policy (no inline script or style, nothing
// from another origin).
//
// Like the REST and MCP front doors it knows no store and no engine: each
// page calls the application services of internal/service with the
// identity of the session's credential, so a page shows and does exactly
// what the same credential could through the API. A session is a
// server-side record (this process's memory) named by an HttpOnly,
// SameSite=Strict cookie; the credential never leaves the server and is
// verified again on every request. Every state-changing form carries the
// session's CSRF token, and requests a browser marks cross-site are
// refused before anything else happens.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/service"
)

// Prefix is where the console is served.
const Prefix = "/console"

// DefaultSessionTTL and DefaultIdleTimeout are the defaults of
// Options.SessionTTL and Options.IdleTimeout.
const (
	DefaultSessionTTL  = 8 * time.Hour
	DefaultIdleTimeout = 30 * time.Minute
)

// Authenticator verifies a bearer credential (*auth.Authenticator).
type Authenticator interface {
	Authenticate(r *http.Request) (*identity.Identity, error)
}

// Options wire a Server. Services and Auth are required.
type Options struct {
	Services service.Services
	Auth     Authenticator
	// PublicURL is console.public_url ("" : each request's own origin).
	PublicURL string
	// SessionTTL and IdleTimeout bound sessions (defaults 8h and 30m).
	SessionTTL  time.Duration
	IdleTimeout time.Duration
	// OIDC, when set, offers sign-in with the identity provider.
	OIDC *OIDCOptions
	// MaxBodyBytes bounds a form (default 1 MiB).
	MaxBodyBytes int64
	Logger       *slog.Logger
	Now          func() time.Time
	// Version is shown in the footer.
	Version string
	// FailClosed, when set, reads the gateway's own count of calls failed
	// closed since it started, by cause (toolgate_fail_closed_total): the
	// overview shows it to auditors, labelled as this process's count for
	// all tenants, since such calls write no audit event to count per
	// tenant.
	FailClosed func() map[string]float64
}

// Server is the console.
type Server struct {
	o        Options
	sessions *sessionStore
	pages    map[string]*template.Template
	static   http.Handler
	public   *url.URL // nil: the request's origin
	oidc     *oidcFlow
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New returns the console.
func New(o Options) (*Server, error) {
	if o.Services.Calls == nil || o.Services.Approvals == nil || o.Services.Policy == nil || o.Services.Audit == nil || o.Auth == nil {
		return nil, errors.New("console: Services and Auth are required")
	}
	// The services are the authority on roles and requests; the console's
	// role checks only decide which pages it shows.
	o.Services = service.Checked(o.Services)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = service.DefaultMaxBodyBytes
	}
	s := &Server{o: o, sessions: newSessionStore(o.SessionTTL, o.IdleTimeout, o.Now)}
	if o.PublicURL != "" {
		u, err := url.Parse(o.PublicURL)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("console: public URL %q is not an absolute URL", o.PublicURL)
		}
		s.public = u
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	s.pages = pages
	sub, _ := fs.Sub(staticFS, "static")
	s.static = http.StripPrefix(Prefix+"/static/", http.FileServer(http.FS(sub)))
	if o.OIDC != nil {
		f, err := newOIDCFlow(*o.OIDC)
		if err != nil {
			return nil, err
		}
		s.oidc = f
	}
	return s, nil
}

// Handler serves /console and everything under it, mounted at Prefix
// (chi's Mount: its routes are relative to the prefix).
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	r.Use(s.headers, s.sameOrigin)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusNotFound, "There is no such page.")
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, http.StatusMethodNotAllowed, "This page does not take that method.")
	})
	r.Get("/static/*", s.static.ServeHTTP)
	r.Get("/login", s.loginPage)
	r.Post("/login", s.login)
	r.Get("/oidc/login", s.oidcLogin)
	r.Get("/oidc/callback", s.oidcCallback)
	r.Group(func(r chi.Router) {
		r.Use(s.signedIn)
		r.Get("/", s.overview)
		r.Post("/logout", s.logout)
		r.Group(func(r chi.Router) {
			r.Use(requireRole(s, identity.RoleAuditor))
			r.Get("/audit", s.auditList)
			r.Get("/audit/export", s.auditExport)
			r.Post("/audit/verify", s.auditVerify)
			r.Get("/audit/{id}", s.auditEvent)
		})
		r.Group(func(r chi.Router) {
			r.Use(requireRole(s, identity.RoleApprover))
			r.Get("/approvals", s.approvalsPage)
			r.Post("/approvals/{id}/approve", s.approve)
			r.Post("/approvals/{id}/deny", s.deny)
		})
		// Anyone signed in may answer a question; the Approvals service
		// decides whether this principal may answer this one, as for
		// POST /v1/questions/{id}/answer.
		r.Get("/questions", s.questionsPage)
		r.Post("/questions/{id}/answer", s.answer)
		r.Group(func(r chi.Router) {
			r.Use(requireRole(s, identity.RolePolicyAdmin))
			r.Get("/policy", s.policyPage)
			r.Post("/policy/eval", s.policyEval)
			r.Post("/policy/replay", s.policyReplay)
		})
	})
	return r
}

// Sessions is how many console sessions this process holds.
func (s *Server) Sessions() int { return s.sessions.len() }

// csp forbids everything not served by the console itself: no inline
// script or style, no frames, forms only to the console.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// headers sets the security headers of every console response.
func (s *Server) headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin") // not no-referrer: Chromium then sends "Origin: null" with same-origin form posts
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
		if !strings.HasPrefix(r.URL.Path, Prefix+"/static/") {
			h.Set("Cache-Control", "no-store")
		} else {
			h.Set("Cache-Control", "no-cache")
		}
		next.ServeHTTP(w, r)
	})
}

// sameOrigin refuses, before anything else runs, a state-changing
// request a browser marks as coming from another site (Sec-Fetch-Site)
// or whose Origin is not the console's. GET and HEAD change nothing and
// pass (links from alerts and mail must work).
func (s *Server) sameOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			next.ServeHTTP(w, r)
			return
		}
		if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
			s.o.Logger.Info("console: cross-site request refused", "path", r.URL.Path, "sec_fetch_site", site, "remote", r.RemoteAddr)
			s.fail(w, r, http.StatusForbidden, "Cross-site requests are refused. Nothing was changed.")
			return
		}
		if o := r.Header.Get("Origin"); o != "" && o != s.origin(r) {
			s.o.Logger.Info("console: request from another origin refused", "path", r.URL.Path, "origin", o, "remote", r.RemoteAddr)
			s.fail(w, r, http.StatusForbidden, "Requests from another origin are refused. Nothing was changed.")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// origin is the console's own origin: console.public_url's, or the
// request's (scheme by TLS, host by Host).
func (s *Server) origin(r *http.Request) string {
	if s.public != nil {
		return s.public.Scheme + "://" + s.public.Host
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// secure reports whether cookies must be Secure: over TLS, or when the
// public URL is https (TLS ends at a proxy).
func (s *Server) secure(r *http.Request) bool {
	return r.TLS != nil || (s.public != nil && s.public.Scheme == "https")
}

type ctxKey int

const signedKey ctxKey = 0

// signed is a request of a live session: the session, shared by the
// browser's concurrent requests and never written after it opened, and
// the identity this request's own verification of its credential gave.
type signed struct {
	sess *session
	id   *identity.Identity
}

// current is the request's session (set by signedIn).
func current(r *http.Request) *session {
	if v, ok := r.Context().Value(signedKey).(signed); ok {
		return v.sess
	}
	return nil
}

// identity is the request's verified identity.
func caller(r *http.Request) *identity.Identity {
	if v, ok := r.Context().Value(signedKey).(signed); ok {
		return v.id
	}
	return nil
}

// signedIn admits requests of a live session whose credential still
// verifies, and checks the CSRF token of every POST. Others go to the
// sign-in page (a POST is not replayed: it changes nothing).
func (s *Server) signedIn(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := r.Cookie(s.cookieName(r))
		var sess *session
		var id *identity.Identity
		if c != nil {
			sess = s.sessions.get(c.Value)
		}
		if sess != nil {
			var err error
			if id, err = s.verify(r.Context(), sess.token); err != nil {
				s.o.Logger.Info("console: session credential no longer verifies; session ended", "err", err)
				s.sessions.end(c.Value)
				sess = nil
			}
		}
		if sess == nil {
			s.toLogin(w, r)
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, s.o.MaxBodyBytes)
			if err := r.ParseForm(); err != nil {
				s.fail(w, r, http.StatusBadRequest, "The form could not be read.")
				return
			}
			if !sameSecret(r.PostForm.Get("csrf"), sess.csrf) {
				s.o.Logger.Info("console: form without a valid CSRF token refused", "path", r.URL.Path, "principal", id.Principal)
				s.fail(w, r, http.StatusForbidden, "The form has expired or did not come from this console. Nothing was changed; reload the page and try again.")
				return
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), signedKey, signed{sess, id})))
	})
}

// verify verifies a credential exactly as an API request's
// Authorization header.
func (s *Server) verify(ctx context.Context, token string) (*identity.Identity, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://console"+Prefix+"/", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	id, err := s.o.Auth.Authenticate(req)
	if err == nil && id == nil {
		err = errors.New("no identity")
	}
	return id, err
}

// toLogin sends a request without a session to the sign-in page, with
// where to return (GET only; a form post is not resumed).
func (s *Server) toLogin(w http.ResponseWriter, r *http.Request) {
	target := Prefix + "/login"
	if r.Method == http.MethodGet {
		if next := r.URL.RequestURI(); next != Prefix+"/" {
			target += "?next=" + url.QueryEscape(next)
		}
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// requireRole shows a page only to credentials with role; others get 403.
func requireRole(s *Server, role string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !caller(r).HasRole(role) {
				s.fail(w, r, http.StatusForbidden, fmt.Sprintf("This page needs the %s role, which your credential does not have.", role))
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// localNext is a post-sign-in destination: a console path on this
// origin, never another site ("" when next is not one).
func localNext(next string) string {
	if next == "" || !strings.HasPrefix(next, Prefix+"/") || strings.HasPrefix(next, "//") ||
		strings.ContainsAny(next, "\\\r\n") {
		return ""
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return ""
	}
	return next
}
