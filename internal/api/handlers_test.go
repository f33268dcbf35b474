package api

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/service"
)

const admin = identity.RoleAuditor + "," + identity.RoleApprover + "," + identity.RolePolicyAdmin

// serviceRoutes is one well-formed request for every route whose handler
// calls a service, and the service method it calls.
var serviceRoutes = []struct {
	method, path, body, service string
}{
	{"GET", "/v1/tools", "", "Tools"},
	{"POST", "/v1/tools/t/calls", `{"arguments":{}}`, "Call"},
	{"POST", "/v1/tools/t/decisions", `{}`, "Decide"},
	{"POST", "/v1/batches", `{"calls":[{"tool":"t"}]}`, "Batch"},
	{"POST", "/v1/batches/decisions", `{"calls":[{"tool":"t"}]}`, "Batch"},
	{"GET", "/v1/audit/events", "", "Events"},
	{"GET", "/v1/audit/events/e1", "", "Event"},
	{"GET", "/v1/audit/verify", "", "Verify"},
	{"POST", "/v1/audit/verify", `{"checkpoint":"note"}`, "VerifyCheckpoint"},
	{"GET", "/v1/audit/checkpoint", "", "Checkpoint"},
	{"GET", "/v1/audit/checkpoint/verifier", "", "VerifierKey"},
	{"GET", "/v1/audit/events/e1/proof?size=3", "", "InclusionProof"},
	{"GET", "/v1/audit/consistency?from=1&to=2", "", "ConsistencyProof"},
	{"GET", "/v1/audit/export", "", "Export"},
	{"GET", "/v1/calls/c1", "", "CallStatus"},
	{"POST", "/v1/questions/q1/answer", `{"answer":"yes"}`, "Answer"},
	{"GET", "/v1/approvals", "", "Approvals"},
	{"GET", "/v1/approvals/a1", "", "Approval"},
	{"POST", "/v1/approvals/a1/approve", "", "Approve"},
	{"POST", "/v1/approvals/a1/deny", `{"comment":"no"}`, "Deny"},
	{"POST", "/v1/policy/eval", `{"input":{"tenant":"acme"}}`, "Evaluate"},
	{"POST", "/v1/policy/replay", `{"candidate":"shadow"}`, "Replay"},
}

// kindOfStatus is the kind a service returns for a documented status.
var kindOfStatus = map[int]service.Kind{
	400: service.KindInvalid, 403: service.KindForbidden, 404: service.KindNotFound, 409: service.KindConflict,
	424: service.KindPermanent, 429: service.KindRateLimited, 500: service.KindInternal, 503: service.KindUnavailable,
}

// Every route hands a well-formed request to exactly its service, with
// the identity of the credential; and every status api/openapi.yaml
// documents for it that a service error can cause is written, from the
// error, in the documented shape. A handler that mapped an error itself,
// or wrote a body the contract does not describe, fails here.
func TestEveryRouteWritesServiceErrorsAsDocumented(t *testing.T) {
	for _, rt := range serviceRoutes {
		h := newHarness(t, Options{})
		resp := h.do(rt.method, rt.path, admin, rt.body)
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("%s %s: %d %s", rt.method, rt.path, resp.StatusCode, b)
		}
		if got := h.f.called(); !slices.Equal(got, []string{rt.service}) {
			t.Errorf("%s %s called %v, want [%s]", rt.method, rt.path, got, rt.service)
		}
		if id := h.f.ids[0]; rt.service != "VerifierKey" && (id == nil || id.Tenant != "acme" || id.Principal != "p") {
			t.Errorf("%s %s: the service saw identity %+v, not the credential's", rt.method, rt.path, id)
		}

		path, _, _ := strings.Cut(rt.path, "?")
		documented := h.spec.Statuses(rt.method, templateOf(h, rt.method, path))
		seen := 0
		for _, st := range documented {
			code, _ := strconv.Atoi(st)
			kind, ok := kindOfStatus[code]
			if !ok {
				continue
			}
			seen++
			h.f.err = &service.Error{Kind: kind, Message: "said by the service", CallID: "c-9", DecisionID: "d-9"}
			resp := h.do(rt.method, rt.path, admin, rt.body)
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != code {
				t.Errorf("%s %s with a %s error: %d %s, want %d", rt.method, rt.path, kind, resp.StatusCode, b, code)
				continue
			}
			if err := h.spec.Check(rt.method, path, code, resp.Header.Get("Content-Type"), b); err != nil {
				t.Errorf("%s %s %d: %v", rt.method, rt.path, code, err)
			}
			var body apiv1.ErrorBody
			if err := json.Unmarshal(b, &body); err != nil || body.Error.Code != kind.Code() || body.Error.Message != "said by the service" ||
				body.Error.CallID != "c-9" || body.Error.DecisionID != "d-9" {
				t.Errorf("%s %s %d: body %s", rt.method, rt.path, code, b)
			}
		}
		if seen == 0 {
			t.Errorf("%s %s documents no status a service error can cause: %v", rt.method, rt.path, documented)
		}
	}
}

// templateOf finds the route template api/openapi.yaml names path by.
func templateOf(h *harness, method, path string) string {
	for _, op := range h.spec.Operations() {
		if m, tmpl, _ := strings.Cut(op, " "); m == method && matchTemplate(tmpl, path) {
			return tmpl
		}
	}
	return path
}

// matchTemplate reports whether path is an instance of the route
// template tmpl ("/v1/approvals/{id}").
func matchTemplate(tmpl, path string) bool {
	ts, ps := strings.Split(tmpl, "/"), strings.Split(path, "/")
	if len(ts) != len(ps) {
		return false
	}
	for i := range ts {
		if !strings.HasPrefix(ts[i], "{") && ts[i] != ps[i] {
			return false
		}
	}
	return true
}

// An error that is no *service.Error is a 500 that says nothing: its
// text (here a database's, with an address and a password) never reaches
// the client.
func TestForeignErrorsSayNothing(t *testing.T) {
	h := newHarness(t, Options{})
	h.f.err = errForeign
	for _, rt := range serviceRoutes {
		resp := h.do(rt.method, rt.path, admin, rt.body)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 500 || strings.Contains(string(b), "hunter2") || strings.Contains(string(b), "10.1.2.3") {
			t.Errorf("%s %s: %d %s", rt.method, rt.path, resp.StatusCode, b)
		}
	}
}

// Retry-After comes from the error: whole seconds rounded up, always on
// a 429 (at least 1), and on a 503 only when retrying soon may help.
func TestRetryAfterComesFromTheError(t *testing.T) {
	for _, c := range []struct {
		err  *service.Error
		want string
	}{
		{&service.Error{Kind: service.KindRateLimited, Message: "m", RetryAfter: 1200 * time.Millisecond}, "2"},
		{&service.Error{Kind: service.KindRateLimited, Message: "m"}, "1"},
		{&service.Error{Kind: service.KindUnavailable, Message: "m", RetryAfter: time.Second}, "1"},
		{&service.Error{Kind: service.KindUnavailable, Message: "m"}, ""},
		{&service.Error{Kind: service.KindConflict, Message: "m"}, ""},
	} {
		h := newHarness(t, Options{})
		h.f.err = c.err
		resp := h.do("POST", "/v1/tools/t/calls", "agent", `{}`)
		if got := resp.Header.Get("Retry-After"); got != c.want || resp.StatusCode != c.err.Kind.HTTPStatus() {
			t.Errorf("%s retry %s: %d Retry-After %q, want %d %q", c.err.Kind, c.err.RetryAfter, resp.StatusCode, got, c.err.Kind.HTTPStatus(), c.want)
		}
	}
}

// A malformed envelope is answered by the HTTP layer alone: the service
// never sees it, so nothing is decided, run or audited.
func TestBadEnvelopesNeverReachTheService(t *testing.T) {
	for _, c := range []struct {
		name, path, contentType, body string
		status                        int
		message                       string
	}{
		{"a body naming a tenant", "/v1/tools/t/calls", "application/json", `{"arguments":{},"tenant":"other"}`, 400, `unknown member "tenant"`},
		{"a body naming a principal", "/v1/tools/t/decisions", "application/json", `{"principal":"root"}`, 400, `unknown member "principal"`},
		{"a duplicate member", "/v1/tools/t/calls", "application/json", `{"arguments":{},"arguments":{}}`, 400, `duplicate member "arguments"`},
		{"trailing data", "/v1/tools/t/calls", "application/json", `{} {}`, 400, "unexpected data after the JSON object"},
		{"an array root", "/v1/tools/t/calls", "application/json", `[]`, 400, "body must be a JSON object"},
		{"a bad call_id", "/v1/tools/t/calls", "application/json", `{"call_id":"../x"}`, 400, "call_id must be"},
		{"text/plain", "/v1/tools/t/calls", "text/plain", `{}`, 415, "Content-Type: application/json"},
		{"latin-1 JSON", "/v1/tools/t/calls", "application/json; charset=latin1", `{}`, 415, "Content-Type: application/json"},
		{"an oversized body", "/v1/tools/t/calls", "application/json", `{"arguments":"` + strings.Repeat("a", 2048) + `"}`, 413, "exceeds 1024 bytes"},
		{"an empty batch", "/v1/batches", "application/json", `{"calls":[]}`, 400, "calls must not be empty"},
		{"a batch with a repeated call_id", "/v1/batches", "application/json", `{"calls":[{"tool":"a","call_id":"x"},{"tool":"b","call_id":"x"}]}`, 400, "calls[1].call_id repeats the call_id of calls[0]"},
		{"a batch over the cap", "/v1/batches", "application/json", `{"calls":[{"tool":"a"},{"tool":"a"},{"tool":"a"}]}`, 400, "at most 2 calls"},
		{"a batch call naming a tenant", "/v1/batches/decisions", "application/json", `{"calls":[{"tool":"a","tenant":"x"}]}`, 400, `calls[0] has unknown member "tenant"`},
		{"an answer that is no string", "/v1/questions/q/answer", "application/json", `{"answer":1}`, 400, `"answer"`},
		{"an overlong comment", "/v1/approvals/a/approve", "application/json", `{"comment":"` + strings.Repeat("x", 1001) + `"}`, 400, "comment must be at most 1000 bytes"},
		{"eval with both forms", "/v1/policy/eval", "application/json", `{"input":{},"tool":"t","principal":{"id":"x"}}`, 400, "not both"},
		{"eval with an unknown explain", "/v1/policy/eval", "application/json", `{"input":{},"explain":"all"}`, 400, "explain must be"},
		{"replay with a bad time", "/v1/policy/replay", "application/json", `{"candidate":"shadow","from":"yesterday"}`, 400, "from must be an RFC 3339 time"},
		{"replay of shadow with modules", "/v1/policy/replay", "application/json", `{"candidate":"shadow","modules":{"a.rego":"package a"}}`, 400, `give either "modules"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, Options{MaxBodyBytes: 1024, MaxBatchCalls: 2})
			req, _ := http.NewRequest("POST", c.path, strings.NewReader(c.body))
			req.Header.Set("Authorization", "Bearer roles:"+admin)
			req.Header.Set("Content-Type", c.contentType)
			rec := httptest.NewRecorder()
			h.h.ServeHTTP(rec, req)
			resp := rec.Result()
			d := errorOf(t, resp)
			if resp.StatusCode != c.status || !strings.Contains(d.Message, c.message) {
				t.Errorf("%d %+v, want %d with %q", resp.StatusCode, d, c.status, c.message)
			}
			if got := h.f.called(); len(got) != 0 {
				t.Errorf("the service was called: %v", got)
			}
			if err := h.spec.Check("POST", c.path, resp.StatusCode, resp.Header.Get("Content-Type"), mustJSON(t, apiv1.ErrorBody{Error: d})); err != nil {
				t.Error(err)
			}
		})
	}
}

// Only a verified credential gets in, and the management routes need
// their role; neither failure reaches a service. Tool calls need no role:
// policy decides them.
func TestAuthenticationAndRolesGuardTheServices(t *testing.T) {
	for _, rt := range serviceRoutes {
		h := newHarness(t, Options{})
		resp := h.do(rt.method, rt.path, "", rt.body)
		if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") != `Bearer realm="toolgate"` || errorOf(t, resp).Code != CodeUnauthenticated {
			t.Errorf("%s %s without a credential: %d", rt.method, rt.path, resp.StatusCode)
		}
		resp = h.do(rt.method, rt.path, "agent", rt.body)
		var role string
		switch {
		case strings.HasPrefix(rt.path, "/v1/audit/"):
			role = identity.RoleAuditor
		case strings.HasPrefix(rt.path, "/v1/approvals"):
			role = identity.RoleApprover
		case strings.HasPrefix(rt.path, "/v1/policy"):
			role = identity.RolePolicyAdmin
		}
		if role == "" {
			if resp.StatusCode != 200 {
				t.Errorf("%s %s as an agent: %d, want 200 (no role needed)", rt.method, rt.path, resp.StatusCode)
			}
			continue
		}
		if d := errorOf(t, resp); resp.StatusCode != 403 || d.Message != "this route requires the "+role+" role" {
			t.Errorf("%s %s as an agent: %d %+v", rt.method, rt.path, resp.StatusCode, d)
		}
		if got := h.f.called(); len(got) != 0 {
			t.Errorf("%s %s: an unauthorized request reached %v", rt.method, rt.path, got)
		}
		// The one role is enough; another management role is not.
		if resp := h.do(rt.method, rt.path, role, rt.body); resp.StatusCode != 200 {
			t.Errorf("%s %s with %s: %d", rt.method, rt.path, role, resp.StatusCode)
		}
	}
}

// A call's outcome is a 200 whatever it is; the service's response is
// written as is, and the request it got is the envelope's, with the
// route's tool name.
func TestCallAnswersTheServiceResponse(t *testing.T) {
	h := newHarness(t, Options{})
	h.f.call = apiv1.CallResponse{CallID: "c1", DecisionID: "d1", Outcome: apiv1.OutcomeDenied, Content: "permission denied", IsError: true}
	resp := h.do("POST", "/v1/tools/read-file/calls", "agent", `{"arguments":{"path":"a"},"session_id":"s-1","call_id":"c1"}`)
	b, _ := io.ReadAll(resp.Body)
	var got apiv1.CallResponse
	if err := json.Unmarshal(b, &got); err != nil || resp.StatusCode != 200 || !reflect.DeepEqual(got, h.f.call) {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	r := h.f.callReq
	if r.Tool != "read-file" || string(r.Arguments) != `{"path":"a"}` || r.SessionID != "s-1" || r.CallID != "c1" {
		t.Errorf("the service got %+v", r)
	}
}

// A failed batch answers with the batch's error and every call's entry;
// one stopped by a call_id before anything was decided answers the error
// alone.
func TestBatchFailures(t *testing.T) {
	h := newHarness(t, Options{})
	h.f.batch = service.BatchResult{Failed: 1, Results: []any{
		apiv1.CallResponse{CallID: "a", DecisionID: "da", Outcome: apiv1.OutcomeOK, Content: "x"},
		apiv1.BatchFailure{CallID: "b", DecisionID: "db", Error: apiv1.ErrorDetail{Code: CodeUnavailable, Message: "policy is unavailable; this call was not run"}},
	}}
	h.f.err = &service.Error{Kind: service.KindUnavailable, Message: "policy is unavailable at calls[1]; the batch was canceled", RetryAfter: time.Second}
	resp := h.do("POST", "/v1/batches", "agent", `{"calls":[{"tool":"t"},{"tool":"t"}]}`)
	b, _ := io.ReadAll(resp.Body)
	var got apiv1.BatchResponse
	if err := json.Unmarshal(b, &got); err != nil || resp.StatusCode != 503 || resp.Header.Get("Retry-After") != "1" ||
		got.Error == nil || got.Error.Message != h.f.err.(*service.Error).Message || len(got.Results) != 2 ||
		got.Results[0].Outcome != apiv1.OutcomeOK || got.Results[1].Error == nil || got.Results[1].CallID != "b" {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if err := h.spec.Check("POST", "/v1/batches", 503, resp.Header.Get("Content-Type"), b); err != nil {
		t.Error(err)
	}

	h.f.batch = service.BatchResult{Failed: 0}
	h.f.err = &service.Error{Kind: service.KindConflict, Message: "calls[0]: call_id was already used by another request"}
	resp = h.do("POST", "/v1/batches", "agent", `{"calls":[{"tool":"t","call_id":"k"}]}`)
	if d := errorOf(t, resp); resp.StatusCode != 409 || d.Code != CodeConflict || !strings.HasPrefix(d.Message, "calls[0]: ") {
		t.Errorf("%d %+v", resp.StatusCode, d)
	}
}

// A long poll's wait is bounded before the service sees it.
func TestCallStatusWait(t *testing.T) {
	h := newHarness(t, Options{})
	for _, bad := range []string{"61s", "-1s", "61", "soon", "1s&wait=2s", "1s&x=1"} {
		if resp := h.do("GET", "/v1/calls/c1?wait="+bad, "agent", ""); resp.StatusCode != 400 {
			t.Errorf("wait=%s: %d", bad, resp.StatusCode)
		}
	}
	if got := h.f.called(); len(got) != 0 {
		t.Fatalf("a bad wait reached %v", got)
	}
	resp := h.do("GET", "/v1/calls/c1?wait=30", "agent", "")
	var st apiv1.CallStatus
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &st); err != nil || st.ExpiresAt != (30*time.Second).String() {
		t.Errorf("the service got wait %q: %s", st.ExpiresAt, b)
	}
}

type keyAuth struct {
	rolesAuth
	status string
}

func (k keyAuth) KeyStatus() string { return k.status }

// Readiness is every check "ok"; any other word (policy, audit, or the
// identity provider's keys) is a 503 that names it and nothing more.
func TestReadiness(t *testing.T) {
	for _, c := range []struct {
		checks map[string]string
		keys   string
		status int
	}{
		{nil, "", 200},
		{map[string]string{"policy": "not loaded", "audit": "ok"}, "", 503},
		{map[string]string{"policy": "ok", "audit": "commits failing"}, "", 503},
		{nil, "ok", 200},
		{nil, "keys not loaded", 503},
	} {
		h := newHarness(t, Options{Auth: keyAuth{status: c.keys}})
		h.f.checks = c.checks
		resp := h.do("GET", "/readyz", "", "")
		b, _ := io.ReadAll(resp.Body)
		var body struct {
			Status string            `json:"status"`
			Checks map[string]string `json:"checks"`
		}
		if err := json.Unmarshal(b, &body); err != nil || resp.StatusCode != c.status || (c.status == 200) != (body.Status == "ready") {
			t.Errorf("%v keys %q: %d %s", c.checks, c.keys, resp.StatusCode, b)
		}
		if c.keys != "" && body.Checks["identity"] != c.keys {
			t.Errorf("keys %q not reported: %s", c.keys, b)
		}
		if err := h.spec.Check("GET", "/readyz", resp.StatusCode, resp.Header.Get("Content-Type"), b); err != nil {
			t.Error(err)
		}
	}
}

// An export streams what the service emits, one line each; a failure
// before the first line is a JSON error, one after it ends the stream
// with the interruption line.
func TestExportStreams(t *testing.T) {
	h := newHarness(t, Options{})
	h.f.export = [][]any{{map[string]any{"n": 1}, map[string]any{"n": 2}}, {map[string]any{"n": 3}}}
	resp := h.do("GET", "/v1/audit/export?format=opa", identity.RoleAuditor, "")
	if lines := readLines(t, resp); resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" ||
		!slices.Equal(lines, []string{`{"n":1}`, `{"n":2}`, `{"n":3}`}) {
		t.Errorf("%d %q", resp.StatusCode, lines)
	}

	h.f.export = [][]any{{map[string]any{"n": 1}}}
	h.f.err = &service.Error{Kind: service.KindUnavailable, Message: "audit log is unavailable"}
	resp = h.do("GET", "/v1/audit/export", identity.RoleAuditor, "")
	if lines := readLines(t, resp); resp.StatusCode != 200 || !slices.Equal(lines, []string{`{"n":1}`, strings.TrimSpace(string(exportInterrupted))}) {
		t.Errorf("interrupted: %d %q", resp.StatusCode, lines)
	}

	h.f.export = nil
	h.f.err = &service.Error{Kind: service.KindInvalid, Message: "from must not be after to"}
	resp = h.do("GET", "/v1/audit/export", identity.RoleAuditor, "")
	if d := errorOf(t, resp); resp.StatusCode != 400 || d.Message != "from must not be after to" {
		t.Errorf("before the first line: %d %+v", resp.StatusCode, d)
	}
	if resp := h.do("GET", "/v1/audit/export?format=csv", identity.RoleAuditor, ""); resp.StatusCode != 400 {
		t.Errorf("format=csv: %d", resp.StatusCode)
	}
}

func readLines(t *testing.T, resp *http.Response) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
