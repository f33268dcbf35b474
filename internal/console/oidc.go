package console

import (
	"errors"
	"net/http"
)

// OIDCOptions configure sign-in with the identity provider.
type OIDCOptions struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	RedirectURL  string
	Scopes       []string
}

// TODO(console): the OIDC flow (being built).
type oidcFlow struct{}

func newOIDCFlow(OIDCOptions) (*oidcFlow, error) {
	return nil, errors.New("console: OIDC sign-in is not built yet")
}

func (s *Server) oidcLogin(w http.ResponseWriter, r *http.Request) {
	s.fail(w, r, http.StatusNotFound, "Sign-in with the identity provider is not configured.")
}
func (s *Server) oidcCallback(w http.ResponseWriter, r *http.Request) {
	s.fail(w, r, http.StatusNotFound, "Sign-in with the identity provider is not configured.")
}
