package console

import (
	"net/http"
	"strings"
	"time"
)

// Cookie names. Over TLS the session cookie takes the __Host- prefix, so
// no subdomain can set or shadow it.
const (
	cookieSession       = "toolgate_console"
	cookieSessionSecure = "__Host-toolgate_console"
	cookieLogin         = "toolgate_console_login" // the sign-in form's CSRF token
	cookieLoginSecure   = "__Host-toolgate_console_login"
)

func (s *Server) cookieName(r *http.Request) string {
	if s.secure(r) {
		return cookieSessionSecure
	}
	return cookieSession
}

func (s *Server) loginCookieName(r *http.Request) string {
	if s.secure(r) {
		return cookieLoginSecure
	}
	return cookieLogin
}

func (s *Server) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge time.Duration) {
	c := &http.Cookie{Name: name, Value: value, Path: "/", HttpOnly: true, Secure: s.secure(r),
		SameSite: http.SameSiteStrictMode}
	switch {
	case maxAge < 0:
		c.MaxAge = -1
	case maxAge > 0:
		c.MaxAge = int(maxAge / time.Second)
	}
	http.SetCookie(w, c)
}

// loginView is the sign-in page's data.
type loginView struct {
	Next string
	OIDC bool
	// LoginCSRF is the sign-in form's token, also in its cookie (a
	// double submit: a form posted from another site has neither).
	LoginCSRF string
}

// loginPage is the sign-in form. A browser that is signed in already is
// sent on.
func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	if c, _ := r.Cookie(s.cookieName(r)); c != nil && s.sessions.get(c.Value) != nil {
		http.Redirect(w, r, orOverview(localNext(r.URL.Query().Get("next"))), http.StatusSeeOther)
		return
	}
	s.renderLogin(w, r, http.StatusOK, "")
}

func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, status int, problem string) {
	tok := randomToken()
	s.setCookie(w, r, s.loginCookieName(r), tok, 15*time.Minute)
	next := localNext(r.URL.Query().Get("next"))
	if next == "" && r.Method == http.MethodPost {
		next = localNext(r.PostForm.Get("next"))
	}
	s.render(w, r, status, "login", view{Title: "Sign in", Problem: problem,
		Data: loginView{Next: next, OIDC: s.oidc != nil, LoginCSRF: tok}})
}

func orOverview(next string) string {
	if next == "" {
		return Prefix + "/"
	}
	return next
}

// login verifies the token of the sign-in form exactly like an API
// request's bearer credential and opens a session for it.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		s.renderLogin(w, r, http.StatusBadRequest, "The form could not be read.")
		return
	}
	c, _ := r.Cookie(s.loginCookieName(r))
	if c == nil || !sameSecret(r.PostForm.Get("csrf"), c.Value) {
		s.o.Logger.Info("console: sign-in form without a valid CSRF token refused", "remote", r.RemoteAddr)
		s.renderLogin(w, r, http.StatusForbidden, "The sign-in form expired or did not come from this console. Try again.")
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	if rest, ok := cutBearer(token); ok {
		token = rest
	}
	if token == "" {
		s.renderLogin(w, r, http.StatusBadRequest, "Paste a bearer token (a JWT or an API key).")
		return
	}
	id, err := s.verify(r.Context(), token)
	if err != nil {
		s.o.Logger.Info("console: sign-in refused", "remote", r.RemoteAddr, "err", err)
		s.renderLogin(w, r, http.StatusUnauthorized, "The token was not accepted.")
		return
	}
	if old, _ := r.Cookie(s.cookieName(r)); old != nil {
		s.sessions.end(old.Value) // a new sign-in replaces the browser's session, never adds to it
	}
	cookie, _ := s.sessions.open(token, "token", id.Expires)
	s.setCookie(w, r, s.loginCookieName(r), "", -1)
	s.setCookie(w, r, s.cookieName(r), cookie, 0)
	s.o.Logger.Info("console: signed in", "tenant", id.Tenant, "principal", id.Principal, "method", "token")
	http.Redirect(w, r, orOverview(localNext(r.PostForm.Get("next"))), http.StatusSeeOther)
}

// cutBearer accepts a pasted "Bearer <token>" as the token.
func cutBearer(s string) (string, bool) {
	const p = "bearer "
	if len(s) > len(p) && strings.EqualFold(s[:len(p)], p) {
		return strings.TrimSpace(s[len(p):]), true
	}
	return s, false
}

// logout ends the session.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if c, _ := r.Cookie(s.cookieName(r)); c != nil {
		s.sessions.end(c.Value)
	}
	s.setCookie(w, r, s.cookieName(r), "", -1)
	http.Redirect(w, r, Prefix+"/login", http.StatusSeeOther)
}
