package api

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/internal/api/apispec"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/mcpserver"
)

// rolesAuth admits "Bearer roles:a,b" with those roles; anything else is
// unauthenticated. The router's middleware is what is under test here; the
// real authenticator is driven end to end in internal/gateway.
type rolesAuth struct{}

func (rolesAuth) Authenticate(r *http.Request) (*identity.Identity, error) {
	roles, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer roles:")
	if !ok {
		return nil, errors.New("no credential")
	}
	return &identity.Identity{Tenant: "acme", Principal: "p", Roles: strings.Split(roles, ",")}, nil
}

var paramRE = regexp.MustCompile(`\{[^/}]+\}`)

// probe sends one request to the router (no network) and returns its
// status; a handler that reaches the absent pipeline panics into the
// recoverer's 500, which is fine: only the middleware's answers count.
func probe(h http.Handler, method, route, token, contentType, body string) int {
	req := httptest.NewRequest(method, paramRE.ReplaceAllString(route, "x"), strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code
}

// The router and api/openapi.yaml describe the same API: every served
// route and method is an operation and every operation is served, and
// each operation documents every status its middleware and body handling
// answer — found by sending each route what provokes them: no credential
// (401 behind authentication), a credential without roles (403 behind a
// role check), a non-JSON body (415), an oversized one (413), a malformed
// one (400); and 500, which the recoverer can answer anywhere. A request
// no operation matches answers 401, 404 or 405, as the document's
// x-unrouted-responses say.
func TestRouterAndOpenAPIAgree(t *testing.T) {
	spec, err := apispec.Load("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	front := mcpserver.New(mcpserver.Options{Auth: rolesAuth{}, MaxBodyBytes: 1024})
	s := New(Options{Gatherer: prometheus.NewRegistry(), Auth: rolesAuth{}, Logger: nil, MaxBodyBytes: 1024, MCP: front.Handler()})
	h := s.Handler()
	admin := "roles:" + strings.Join([]string{identity.RoleAuditor, identity.RoleApprover, identity.RolePolicyAdmin}, ",")

	var served []string
	guarded := map[string]bool{}
	err = chi.Walk(h.(chi.Routes), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		route = strings.TrimSuffix(route, "/")
		op := method + " " + route
		served = append(served, op)
		docd := spec.Statuses(method, route)
		if docd == nil {
			t.Errorf("%s is served but not in api/openapi.yaml", op)
			return nil
		}
		answers := map[string]string{"500": "the recoverer"}
		if st := probe(h, method, route, "", "", ""); st == 401 {
			answers["401"] = "without a credential"
		} else if strings.HasPrefix(route, "/v1/") {
			t.Errorf("%s answers %d without a credential", op, st)
		}
		if probe(h, method, route, "roles:none", "", "") == 403 {
			answers["403"] = "without its role"
			guarded[op] = true
		}
		if spec.HasRequestBody(method, route) {
			if st := probe(h, method, route, admin, "text/plain", "{}"); st != 415 {
				t.Errorf("%s answers %d to a text/plain body", op, st)
			}
			if st := probe(h, method, route, admin, "application/json", strings.Repeat(" ", 20<<10)); st != 413 {
				t.Errorf("%s answers %d to an oversized body", op, st)
			}
			if st := probe(h, method, route, admin, "application/json", "{"); st != 400 {
				t.Errorf("%s answers %d to a malformed body", op, st)
			}
			answers["415"], answers["413"], answers["400"] = "a non-JSON body", "an oversized body", "a malformed body"
		}
		for code, why := range answers {
			if !slices.Contains(docd, code) {
				t.Errorf("%s answers %s to %s, but api/openapi.yaml does not list it (it lists %v)", op, code, why, docd)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(served)
	if ops := spec.Operations(); !slices.Equal(served, ops) {
		t.Errorf("served routes and OpenAPI operations differ:\nserved:     %v\ndocumented: %v", served, ops)
	}
	// The probes would pass vacuously if no role check were ever seen.
	for op, want := range map[string]bool{
		"GET /v1/audit/events": true, "POST /v1/approvals/{id}/approve": true, "POST /v1/policy/eval": true,
		"POST /v1/tools/{name}/calls": false, "GET /v1/calls/{call_id}": false, "GET /healthz": false,
	} {
		if guarded[op] != want {
			t.Errorf("%s: role check seen %v, want %v", op, guarded[op], want)
		}
	}
	if got := spec.UnroutedStatuses(); !slices.Equal(got, []string{"401", "404", "405"}) {
		t.Errorf("x-unrouted-responses lists %v, want 401, 404 and 405", got)
	}
	for _, c := range []struct {
		method, path, token string
		status              int
	}{
		{"GET", "/v1/nope", "", 401}, {"GET", "/v1/nope", admin, 404}, {"GET", "/nope", "", 404},
		{"DELETE", "/v1/tools", admin, 405}, {"POST", "/healthz", "", 405},
	} {
		if st := probe(h, c.method, c.path, c.token, "", ""); st != c.status {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, st, c.status)
		}
		if err := spec.Check(c.method, c.path, c.status, "application/json", []byte(`{"error":{"code":"not_found","message":"y"}}`)); err != nil {
			t.Errorf("%s %s %d: %v", c.method, c.path, c.status, err)
		}
	}
	if err := spec.Check("GET", "/nope", 418, "application/json", []byte(`{}`)); err == nil || !strings.Contains(err.Error(), strconv.Itoa(418)) {
		t.Errorf("an undocumented unrouted status passed the check: %v", err)
	}
}
