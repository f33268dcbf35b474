package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
	"github.com/toolgate/toolgate/internal/tools"
)

const schema = `{"type":"object","additionalProperties":false,"required":["service_id"],
 "properties":{"service_id":{"type":"string"},"days":{"type":"integer","default":7},"tags":{"type":"array"}}}`

// fakeSigner records the claims it signed.
type fakeSigner struct {
	mu     sync.Mutex
	claims []upstreamv1.Claims
}

func (f *fakeSigner) Sign(c upstreamv1.Claims) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.claims = append(f.claims, c)
	return "signed-assertion", nil
}

// seen is what the fake upstream received.
type seen struct {
	method, path, contentType, assertion string
	body                                 string
}

func newTool(t *testing.T, h http.HandlerFunc, edit func(*Declaration)) (*Tool, *fakeSigner, chan seen) {
	t.Helper()
	got := make(chan seen, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.Path, r.Header.Get("Content-Type"), r.Header.Get(upstreamv1.AssertionHeader), string(b)}
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	d := Declaration{
		Name: "maintenance-window", Description: "d", InputSchema: schema, Action: "maintenance.read",
		Resources: []map[string]string{{"type": "service", "id": "/service_id", "first_tag": "/tags/0"}},
		URL:       srv.URL + "/mw", Method: "POST", Timeout: 5 * time.Second, MaxConcurrent: 4, MaxResponseBytes: 1024,
	}
	if edit != nil {
		edit(&d)
	}
	signer := &fakeSigner{}
	tool, err := New(d, signer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tool.Close() })
	return tool, signer, got
}

var env = &tools.Env{Tenant: "acme", Principal: "alice", Roles: []string{"developer"}, CallID: "c-1", SessionID: "s-1", RequestDigest: "sha256:doc"}

func reply(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func TestPrepareBuildsResourcesDefaultsAndCanonicalBody(t *testing.T) {
	tool, _, _ := newTool(t, reply(200, `"ok"`), nil)
	plan, err := tool.Prepare(context.Background(), env, map[string]any{"tags": []any{"db", "eu"}, "service_id": "checkout"})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Args["days"] != 7.0 {
		t.Fatalf("schema default not applied: %v", plan.Args)
	}
	r := plan.Resources[0]
	if r["type"] != "service" || r["id"] != "checkout" || r["first_tag"] != "db" {
		t.Fatalf("resource = %v", r)
	}
	a := plan.Artifact.(*call)
	if want := `{"days":7,"service_id":"checkout","tags":["db","eu"]}`; string(a.body) != want {
		t.Fatalf("body %s, want canonical %s", a.body, want)
	}
	if tool.Spec().Kind != tools.KindUpstream || !strings.HasPrefix(tool.Spec().SchemaDigest, "sha256:") {
		t.Fatalf("spec = %+v", tool.Spec())
	}

	// A pointer whose target is absent leaves the member out.
	plan, _ = tool.Prepare(context.Background(), env, map[string]any{"service_id": "checkout"})
	if _, ok := plan.Resources[0]["first_tag"]; ok {
		t.Fatalf("absent argument produced a member: %v", plan.Resources[0])
	}
}

func TestRunSendsTheFrozenBodyAndAnAssertion(t *testing.T) {
	tool, signer, got := newTool(t, reply(200, `"window: Sunday 02:00"`), nil)
	args := map[string]any{"service_id": "checkout"}
	plan, err := tool.Prepare(context.Background(), env, args)
	if err != nil {
		t.Fatal(err)
	}
	// Whatever changes after prepare never reaches the upstream.
	args["service_id"] = "payments"
	plan.Args["service_id"] = "payments"
	res, err := tool.Run(context.Background(), env, plan.Artifact, tools.Limits{})
	if err != nil || res.Content != "window: Sunday 02:00" {
		t.Fatalf("Run = %+v, %v", res, err)
	}
	s := <-got
	if s.body != `{"days":7,"service_id":"checkout"}` || s.method != "POST" || s.path != "/mw" ||
		s.contentType != "application/json" || s.assertion != "signed-assertion" {
		t.Fatalf("upstream saw %+v", s)
	}
	c := signer.claims[0]
	want := upstreamv1.Claims{Audience: "maintenance-window", Subject: "alice", Tenant: "acme", Roles: []string{"developer"},
		CallID: "c-1", SessionID: "s-1", RequestDigest: "sha256:doc", ArgsDigest: digestOf([]byte(s.body))}
	if c.Audience != want.Audience || c.Subject != want.Subject || c.Tenant != want.Tenant || c.CallID != want.CallID ||
		c.SessionID != want.SessionID || c.RequestDigest != want.RequestDigest || c.ArgsDigest != want.ArgsDigest ||
		len(c.Roles) != 1 || c.Roles[0] != "developer" {
		t.Fatalf("claims %+v, want %+v", c, want)
	}
}

func TestResponsesFollowTheModelFacingRules(t *testing.T) {
	long := `"` + strings.Repeat("x", 2000) + `"`
	tests := []struct {
		name      string
		status    int
		body      string
		content   string // the result, or the model-facing error text
		model     bool   // a *tools.ModelError
		permanent bool
		failed    string // an internal error containing this
	}{
		{"JSON string passes through", 200, `"no window this week"`, "no window this week", false, false, ""},
		{"other JSON is returned as compact JSON", 200, "{\"start\": \"2025-01-05T02:00Z\",\n \"minutes\": 30}", `{"start":"2025-01-05T02:00Z","minutes":30}`, false, false, ""},
		{"201 is a success too", 201, `[1, 2]`, `[1,2]`, false, false, ""},
		{"declared model-facing error", 404, `{"tool_error":"No maintenance window is scheduled."}`, "No maintenance window is scheduled.", true, false, ""},
		{"declared permanent failure", 409, `{"permanent":true,"detail":"service decommissioned"}`, "", false, true, `detail "service decommissioned"`},
		{"permanent false is not a declaration", 500, `{"permanent":false}`, "", false, false, "undeclared error body"},
		{"error body with other members is undeclared", 400, `{"tool_error":"x","stack":"at main.go:12"}`, "", false, false, "undeclared error body"},
		{"blank tool_error is undeclared", 400, `{"tool_error":"  "}`, "", false, false, "undeclared error body"},
		{"tool_error with control characters is undeclared", 400, `{"tool_error":"a\u0000b"}`, "", false, false, "undeclared error body"},
		{"non-JSON success", 200, `<html>oops</html>`, "", false, false, "body is not JSON"},
		{"empty success", 200, ``, "", false, false, "body is not JSON"},
		{"server error", 500, `panic: nil map`, "", false, false, `status 500, undeclared error body "panic: nil map"`},
		{"redirects are not followed", 302, ``, "", false, false, "status 302"},
		{"oversized response", 200, long, "", false, false, "response larger than 1024 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := reply(tt.status, tt.body)
			if tt.status == 302 {
				h = func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, "http://127.0.0.1:1/elsewhere", http.StatusFound)
				}
			}
			tool, _, got := newTool(t, h, nil)
			plan, err := tool.Prepare(context.Background(), env, map[string]any{"service_id": "checkout"})
			if err != nil {
				t.Fatal(err)
			}
			res, err := tool.Run(context.Background(), env, plan.Artifact, tools.Limits{})
			<-got
			var me *tools.ModelError
			switch {
			case tt.model:
				if !errors.As(err, &me) || me.Message != tt.content {
					t.Fatalf("err = %v, want model error %q", err, tt.content)
				}
			case tt.permanent:
				if !errors.Is(err, tools.ErrPermanent) || !strings.Contains(err.Error(), tt.failed) {
					t.Fatalf("err = %v, want permanent with %q", err, tt.failed)
				}
			case tt.failed != "":
				if err == nil || errors.As(err, &me) || errors.Is(err, tools.ErrPermanent) || !strings.Contains(err.Error(), tt.failed) {
					t.Fatalf("err = %v, want a plain failure containing %q", err, tt.failed)
				}
			default:
				if err != nil || res.Content != tt.content {
					t.Fatalf("Run = %q, %v; want %q", res.Content, err, tt.content)
				}
			}
		})
	}
}

func TestTimeoutAndRefusedConnectionFail(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	tool, _, got := newTool(t, func(http.ResponseWriter, *http.Request) { <-release }, nil)
	plan, _ := tool.Prepare(context.Background(), env, map[string]any{"service_id": "checkout"})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-got; cancel() }() // the deadline passing, without waiting for it
	if _, err := tool.Run(ctx, env, plan.Artifact, tools.Limits{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want the context's error", err)
	}

	dead, _, _ := newTool(t, reply(200, `"x"`), func(d *Declaration) { d.URL = "http://127.0.0.1:1/mw" })
	plan, _ = dead.Prepare(context.Background(), env, map[string]any{"service_id": "checkout"})
	if _, err := dead.Run(context.Background(), env, plan.Artifact, tools.Limits{}); err == nil || !strings.Contains(err.Error(), "POST http://127.0.0.1:1/mw") {
		t.Fatalf("err = %v, want a connection failure naming the endpoint (for the audit log)", err)
	}
}

func TestConcurrencyLimitQueuesCalls(t *testing.T) {
	release := make(chan struct{})
	tool, _, got := newTool(t, func(w http.ResponseWriter, _ *http.Request) { <-release; io.WriteString(w, `"done"`) },
		func(d *Declaration) { d.MaxConcurrent = 1 })
	plan, _ := tool.Prepare(context.Background(), env, map[string]any{"service_id": "checkout"})
	first := make(chan error, 1)
	go func() {
		_, err := tool.Run(context.Background(), env, plan.Artifact, tools.Limits{})
		first <- err
	}()
	<-got // the first call holds the only slot
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tool.Run(ctx, env, plan.Artifact, tools.Limits{}); err == nil || !strings.Contains(err.Error(), "waiting for a connection slot") {
		t.Fatalf("err = %v, want the second call to wait for the slot", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		t.Fatalf("the queued call reached the upstream: %+v", s)
	default:
	}
}

func TestNewRejectsBadDeclarations(t *testing.T) {
	base := Declaration{Name: "t", InputSchema: schema, Action: "a", URL: "http://127.0.0.1:9/", Method: "POST",
		Timeout: time.Second, MaxConcurrent: 1, MaxResponseBytes: 1}
	for name, edit := range map[string]func(*Declaration){
		"bad name":            func(d *Declaration) { d.Name = "Bad" },
		"file URL":            func(d *Declaration) { d.URL = "file:///etc/passwd" },
		"credentials in URL":  func(d *Declaration) { d.URL = "http://u:p@127.0.0.1/" },
		"schema not JSON":     func(d *Declaration) { d.InputSchema = "{" },
		"resource no type":    func(d *Declaration) { d.Resources = []map[string]string{{"id": "/x"}} },
		"bad pointer":         func(d *Declaration) { d.Resources = []map[string]string{{"type": "s", "id": "x"}} },
		"zero response limit": func(d *Declaration) { d.MaxResponseBytes = 0 },
	} {
		d := base
		edit(&d)
		if _, err := New(d, &fakeSigner{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New(base, nil); err == nil {
		t.Error("no signer: accepted")
	}
}
