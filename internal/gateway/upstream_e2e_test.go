package gateway

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/sdk/client"
	"github.com/toolgate/toolgate/sdk/upstream"
)

// upstreamSchema is the declared (and published, and enforced) schema.
const upstreamSchema = `{"type":"object","additionalProperties":false,"required":["service_id"],"properties":{"service_id":{"type":"string","minLength":1,"maxLength":64},"days":{"type":"integer","minimum":1,"maximum":90,"default":7}}}`

// received is one call as the upstream service saw it, after the SDK
// verified the assertion.
type received struct {
	id          *upstream.Identity
	body        string
	token       string
	traceparent string
}

// fakeService is a maintenance-window service built on the SDK, on
// loopback. Its verifier reads the gateway's JWKS, so it is set once the
// gateway listens.
type fakeService struct {
	srv      *httptest.Server
	mu       sync.Mutex
	verifier *upstream.Verifier
	calls    []received
	refused  int
}

type mwArgs struct {
	ServiceID string `json:"service_id"`
	Days      int    `json:"days"`
}

func newFakeService(t *testing.T) *fakeService {
	f := &fakeService{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		v := f.verifier
		f.mu.Unlock()
		id, err := v.Verify(r.Context(), r.Header.Get(upstream.AssertionHeader), body)
		if err != nil {
			f.mu.Lock()
			f.refused++
			f.mu.Unlock()
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		f.mu.Lock()
		f.calls = append(f.calls, received{id: id, body: string(body), token: r.Header.Get(upstream.AssertionHeader),
			traceparent: r.Header.Get("Traceparent")})
		f.mu.Unlock()
		var a mwArgs
		if err := upstream.Decode(body, &a); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		reply := func(status int, v string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, v)
		}
		switch a.ServiceID {
		case "checkout", "payments":
			reply(200, `"`+a.ServiceID+`: Sunday 02:00-02:30 UTC"`)
		case "search":
			reply(200, `{"service": "search", "minutes": 30}`)
		case "none":
			reply(404, `{"tool_error":"No maintenance window is scheduled."}`)
		case "legacy":
			reply(409, `{"permanent":true,"detail":"legacy was decommissioned in 2023"}`)
		case "slow":
			<-r.Context().Done() // until the gateway gives up
		case "huge":
			reply(200, `"`+strings.Repeat("x", 4096)+`"`)
		default:
			reply(500, `{"error":"db at 10.1.2.3 is down"}`)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeService) received() []received {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]received(nil), f.calls...)
}

// withUpstream declares maintenance-window, served at url, and the
// assertion key.
func withUpstream(url string) func(*setup) {
	return func(s *setup) {
		s.authYAML = "  assertion:\n    signing_key_file: keys/assertion.pem\n"
		s.toolsYAML = `tools:
  builtin: [read-file]
  upstream:
    - name: maintenance-window
      description: Find the next maintenance window of a service.
      input_schema: ` + upstreamSchema + `
      annotations: {read_only: true, idempotent: true}
      action: maintenance.read
      resources:
        - {type: service, id: /service_id}
      endpoint:
        url: ` + url + `
        timeout: 2s
        max_concurrent: 4
      limits:
        max_response_bytes: 1024
`
	}
}

// startWithUpstream runs a gateway declaring maintenance-window against a
// fake service, with opts applied after.
func startWithUpstream(t *testing.T, opts ...func(*setup)) (*harness, *fakeService) {
	t.Helper()
	svc := newFakeService(t)
	h := start(t, append([]func(*setup){withUpstream(svc.srv.URL + "/maintenance-window")}, opts...)...)
	v, err := upstream.NewVerifier(upstream.Options{JWKSURL: h.base + "/.well-known/jwks.json", Audience: "maintenance-window"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	svc.mu.Lock()
	svc.verifier = v
	svc.mu.Unlock()
	return h, svc
}

func TestUpstreamToolRunsWithAVerifiedIdentityAndTheFrozenArguments(t *testing.T) {
	t.Parallel()
	h, svc := startWithUpstream(t)
	dev := h.token("acme", "alice", "developer")

	// Discovery: the published schema is the declared one, byte for byte.
	r := h.do("GET", "/v1/tools", dev, nil)
	var listed map[string]any
	for _, tl := range r.body["tools"].([]any) {
		if m := tl.(map[string]any); m["name"] == "maintenance-window" {
			listed = m
		}
	}
	if listed == nil {
		t.Fatalf("maintenance-window not listed: %s", r.raw)
	}
	if b, _ := json.Marshal(listed["input_schema"], json.Deterministic(true)); !sameJSON(t, string(b), upstreamSchema) {
		t.Fatalf("published schema %s differs from the declared one", b)
	}

	// The raw request uses an escape, spacing and no default; the service
	// receives the canonical decided arguments.
	r = h.call(dev, "maintenance-window", `{"arguments":{ "service_id" : "check\u006fut" },"session_id":"s-9"}`)
	if r.status != 200 || r.str("outcome") != "ok" || r.str("content") != "checkout: Sunday 02:00-02:30 UTC" {
		t.Fatalf("call: %d %s", r.status, r.raw)
	}
	got := svc.received()
	if len(got) != 1 {
		t.Fatalf("service saw %d calls", len(got))
	}
	c := got[0]
	if c.body != `{"days":7,"service_id":"checkout"}` {
		t.Fatalf("service received %s, want the canonical decided arguments", c.body)
	}
	if c.id.Subject != "alice" || c.id.Tenant != "acme" || !c.id.HasRole("developer") || c.id.CallID != r.str("call_id") || c.id.SessionID != "s-9" {
		t.Fatalf("asserted identity %+v", c.id)
	}

	// The assertion names the document the policy decided on, as audited.
	evs := h.events("acme", "call_id="+r.str("call_id")+"&phase=decision")
	if len(evs) != 1 || evs[0]["request_digest"] != c.id.RequestDigest {
		t.Fatalf("decision event %v does not carry the asserted digest %s", evs, c.id.RequestDigest)
	}
	in := evs[0]["input"].(map[string]any)
	tool := in["tool"].(map[string]any)
	if tool["kind"] != "upstream" || !strings.HasPrefix(tool["schema_digest"].(string), "sha256:") {
		t.Fatalf("request document tool = %v", tool)
	}
	if b, _ := json.Marshal(in["args"], json.Deterministic(true)); string(b) != c.body {
		t.Fatalf("audited args %s, sent %s", b, c.body)
	}
	res := in["resources"].([]any)
	if len(res) != 1 || res[0].(map[string]any)["type"] != "service" || res[0].(map[string]any)["id"] != "checkout" {
		t.Fatalf("resources = %v", res)
	}

	// Other JSON is returned as JSON text.
	oncall := h.token("acme", "bob", "oncall")
	r = h.call(oncall, "maintenance-window", `{"arguments":{"service_id":"search"}}`)
	if r.str("outcome") != "ok" || r.str("content") != `{"service":"search","minutes":30}` {
		t.Fatalf("object result: %s", r.raw)
	}
	if svc.refused != 0 {
		t.Fatalf("the service refused %d assertions from the gateway", svc.refused)
	}
	h.verify("acme")
}

func TestUpstreamAssertionsCannotBeForgedReplayedOrKeptPastExpiry(t *testing.T) {
	t.Parallel()
	h, svc := startWithUpstream(t)
	r := h.call(h.token("acme", "alice", "developer"), "maintenance-window", `{"arguments":{"service_id":"checkout"}}`)
	if r.str("outcome") != "ok" {
		t.Fatalf("call: %s", r.raw)
	}
	c := svc.received()[0]
	ctx := context.Background()
	v := svc.verifier

	parts := strings.Split(c.token, ".")
	var claims map[string]any
	payload, _ := decodeSegment(parts[1])
	json.Unmarshal(payload, &claims)
	claims["sub"] = "mallory"
	claims["roles"] = []any{"admin"}
	forged, _ := json.Marshal(claims)
	tampered := parts[0] + "." + encodeSegment(forged) + "." + parts[2]

	for name, tc := range map[string]struct {
		token string
		body  string
		want  error
	}{
		"tampered claims":      {tampered, c.body, upstream.ErrInvalidAssertion},
		"stripped signature":   {parts[0] + "." + parts[1] + ".", c.body, upstream.ErrInvalidAssertion},
		"replayed on new args": {c.token, `{"days":7,"service_id":"payments"}`, upstream.ErrBodyMismatch},
	} {
		if _, err := v.Verify(ctx, tc.token, []byte(tc.body)); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", name, err, tc.want)
		}
	}
	// The same assertion, checked once the gateway's 1 minute TTL is over.
	later, err := upstream.NewVerifier(upstream.Options{JWKSURL: h.base + "/.well-known/jwks.json", Audience: "maintenance-window",
		Now: func() time.Time { return c.id.Expires.Add(time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	defer later.Close()
	if _, err := later.Verify(ctx, c.token, []byte(c.body)); !errors.Is(err, upstream.ErrInvalidAssertion) {
		t.Errorf("expired assertion: err = %v", err)
	}
	// Sent straight to the service, a tampered assertion is refused.
	req, _ := http.NewRequest("POST", svc.srv.URL+"/maintenance-window", strings.NewReader(c.body))
	req.Header.Set(upstream.AssertionHeader, tampered)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(svc.received()) != 1 {
		t.Fatalf("tampered assertion: status %d, service ran %d calls", resp.StatusCode, len(svc.received()))
	}
	// An assertion for another tool is refused too.
	other, _ := upstream.NewVerifier(upstream.Options{JWKSURL: h.base + "/.well-known/jwks.json", Audience: "another-tool"})
	defer other.Close()
	if _, err := other.Verify(ctx, c.token, []byte(c.body)); !errors.Is(err, upstream.ErrInvalidAssertion) {
		t.Errorf("assertion accepted by another tool: %v", err)
	}

	// The key set is public and served without credentials.
	jr := h.do("GET", "/.well-known/jwks.json", "", nil)
	if jr.status != 200 || len(jr.body["keys"].([]any)) != 1 {
		t.Fatalf("jwks: %d %s", jr.status, jr.raw)
	}
}

func TestUpstreamFailuresFollowTheModelFacingRules(t *testing.T) {
	t.Parallel()
	h, svc := startWithUpstream(t)
	oncall := h.token("acme", "bob", "oncall")
	tests := []struct {
		service, content, diagnostic string
	}{
		{"none", "No maintenance window is scheduled.", "status 404"},
		{"slow", "the tool failed", "deadline exceeded"},
		{"huge", "the tool failed", "response larger than 1024 bytes"},
		{"broken", "the tool failed", "db at 10.1.2.3 is down"},
	}
	for _, tt := range tests {
		t.Run(tt.service, func(t *testing.T) {
			r := h.call(oncall, "maintenance-window", `{"arguments":{"service_id":"`+tt.service+`"}}`)
			if r.status != 200 || r.str("outcome") != "tool_error" || r.str("content") != tt.content || r.body["is_error"] != true {
				t.Fatalf("%d %s", r.status, r.raw)
			}
			if strings.Contains(string(r.raw), "10.1.2.3") || strings.Contains(string(r.raw), "1024 bytes") {
				t.Fatalf("diagnostic leaked: %s", r.raw)
			}
			ev := h.events("acme", "call_id="+r.str("call_id")+"&phase=result")
			if len(ev) != 1 || ev[0]["outcome"] != "tool_error" {
				t.Fatalf("result event %v", ev)
			}
			if diag := ev[0]["result"].(map[string]any)["error"].(string); !strings.Contains(diag, tt.diagnostic) {
				t.Fatalf("audited diagnostic %q lacks %q", diag, tt.diagnostic)
			}
		})
	}

	// A declared permanent failure ends the run with 424, audited.
	r := h.call(oncall, "maintenance-window", `{"arguments":{"service_id":"legacy"}}`)
	if r.status != http.StatusFailedDependency || r.errCode() != "permanent_failure" || strings.Contains(string(r.raw), "decommissioned") {
		t.Fatalf("permanent failure: %d %s", r.status, r.raw)
	}
	callID := r.body["error"].(map[string]any)["call_id"].(string)
	ev := h.events("acme", "call_id="+callID)
	if len(ev) != 2 || ev[0]["phase"] != "result" || ev[0]["outcome"] != "tool_error" ||
		!strings.Contains(ev[0]["result"].(map[string]any)["error"].(string), "legacy was decommissioned") || ev[1]["outcome"] != "allow" {
		t.Fatalf("permanent failure events %v", ev)
	}
	_ = svc
	h.verify("acme")
}

func TestUpstreamCallsTheModelShapesNeverReachTheService(t *testing.T) {
	t.Parallel()
	h, svc := startWithUpstream(t)
	dev := h.token("acme", "alice", "developer")

	// "payments" exists upstream, "no-such-service" does not: outside the
	// developer's services, both are denied alike and neither is sent.
	real := h.call(dev, "maintenance-window", `{"arguments":{"service_id":"payments"}}`)
	unknown := h.call(dev, "maintenance-window", `{"arguments":{"service_id":"no-such-service"}}`)
	for _, r := range []response{real, unknown} {
		if r.status != 200 || r.str("outcome") != "denied" {
			t.Fatalf("%d %s", r.status, r.raw)
		}
	}
	if strings.ReplaceAll(real.str("content"), "payments", "X") != strings.ReplaceAll(unknown.str("content"), "no-such-service", "X") ||
		real.str("content") != "service payments is not allowed for your roles" {
		t.Fatalf("denials differ beyond the requested id: %q vs %q", real.str("content"), unknown.str("content"))
	}

	for name, body := range map[string]string{
		"duplicate member smuggling a second service": `{"arguments":{"service_id":"checkout","service_id":"payments"}}`,
		"unknown member naming another tenant":        `{"arguments":{"service_id":"checkout","tenant":"globex"}}`,
		"argument out of the schema's range":          `{"arguments":{"service_id":"checkout","days":365}}`,
	} {
		if r := h.call(dev, "maintenance-window", body); r.str("outcome") != "invalid_arguments" {
			t.Errorf("%s: %s", name, r.raw)
		}
	}

	// Availability hides the tool from roles without it, as for built-ins.
	viewer := h.token("acme", "vic", "viewer")
	if r := h.call(viewer, "maintenance-window", `{"arguments":{"service_id":"checkout"}}`); r.str("outcome") != "unavailable" || r.str("content") != "tool unavailable" {
		t.Fatalf("viewer: %s", r.raw)
	}
	if r := h.do("GET", "/v1/tools", viewer, nil); strings.Contains(string(r.raw), "maintenance-window") {
		t.Fatalf("viewer is offered the tool: %s", r.raw)
	}
	// PDP mode decides without calling the service.
	if r := h.do("POST", "/v1/tools/maintenance-window/decisions", dev, []byte(`{"arguments":{"service_id":"checkout"}}`)); r.str("outcome") != "allow" {
		t.Fatalf("decision: %s", r.raw)
	}
	if n := len(svc.received()); n != 0 {
		t.Fatalf("the service received %d calls", n)
	}
}

func TestSDKClientDrivesTheGateway(t *testing.T) {
	t.Parallel()
	h, _ := startWithUpstream(t)
	ctx := context.Background()
	c, err := client.New(h.base, h.token("acme", "bob", "oncall", "auditor"))
	if err != nil {
		t.Fatal(err)
	}
	tools, err := c.ListTools(ctx, "")
	if err != nil || len(tools) != 1 || tools[0].Name != "maintenance-window" {
		t.Fatalf("ListTools = %+v, %v", tools, err)
	}
	res, err := c.Call(ctx, "maintenance-window", mwArgs{ServiceID: "checkout", Days: 3}, &client.CallOptions{CallID: "sdk-call-1"})
	if err != nil || res.Outcome != "ok" || res.CallID != "sdk-call-1" {
		t.Fatalf("Call = %+v, %v", res, err)
	}
	d, err := c.Decide(ctx, "maintenance-window", map[string]any{"service_id": "search"}, nil)
	if err != nil || d.Outcome != "allow" || !strings.HasPrefix(d.RequestDigest, "sha256:") {
		t.Fatalf("Decide = %+v, %v", d, err)
	}
	_, err = c.Call(ctx, "maintenance-window", map[string]any{"service_id": "legacy"}, nil)
	if !client.IsPermanent(err) {
		t.Fatalf("permanent failure: %v", err)
	}
	page, err := c.AuditEvents(ctx, client.AuditQuery{CallID: "sdk-call-1"})
	if err != nil || len(page.Events) != 2 || page.Events[0].Phase != "result" {
		t.Fatalf("AuditEvents = %+v, %v", page, err)
	}
	ev, err := c.AuditEvent(ctx, page.Events[1].ID)
	if err != nil || ev.Outcome != "allow" || ev.Tool != "maintenance-window" {
		t.Fatalf("AuditEvent = %+v, %v", ev, err)
	}
	ver, err := c.VerifyAudit(ctx)
	if err != nil || !ver.OK || ver.EventsChecked == 0 {
		t.Fatalf("VerifyAudit = %+v, %v", ver, err)
	}
	bad, _ := client.New(h.base, "not-a-token")
	var apiErr *client.Error
	if _, err := bad.ListTools(ctx, ""); !errors.As(err, &apiErr) || apiErr.Status != 401 || apiErr.Code != "unauthenticated" {
		t.Fatalf("bad token: %v", err)
	}
}

func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x, json.Deterministic(true))
	ya, _ := json.Marshal(y, json.Deterministic(true))
	return string(xa) == string(ya)
}

func decodeSegment(s string) ([]byte, error) { return base64.RawURLEncoding.DecodeString(s) }

func encodeSegment(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
