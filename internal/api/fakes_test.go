package api

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

	"github.com/go-json-experiment/json"
	"github.com/prometheus/client_golang/prometheus"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/api/apispec"
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/service"
)

// fake implements every service interface. Each method records that it
// was called (and with what identity) and answers err when it is set,
// else a fixed value. These are fakes of our own service interfaces, the
// seam the HTTP layer is tested at; the real services are driven end to
// end in internal/gateway.
type fake struct {
	mu     sync.Mutex
	calls  []string
	ids    []*identity.Identity
	err    error
	checks map[string]string // Health

	call    apiv1.CallResponse
	batch   service.BatchResult
	callReq service.CallRequest
	export  [][]any
}

func (f *fake) saw(name string, id *identity.Identity) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name)
	f.ids = append(f.ids, id)
}

func (f *fake) called() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fake) Tools(_ context.Context, id *identity.Identity, _ string) ([]apiv1.Tool, error) {
	f.saw("Tools", id)
	return []apiv1.Tool{{Name: "t", Description: "d", InputSchema: []byte(`{"type":"object"}`)}}, f.err
}

func (f *fake) Call(_ context.Context, req service.CallRequest) (apiv1.CallResponse, error) {
	f.saw("Call", req.Identity)
	f.callReq = req
	return f.call, f.err
}

func (f *fake) Decide(_ context.Context, req service.CallRequest) (apiv1.DecisionResponse, error) {
	f.saw("Decide", req.Identity)
	return apiv1.DecisionResponse{CallID: f.call.CallID, DecisionID: f.call.DecisionID, Outcome: apiv1.OutcomeAllow}, f.err
}

func (f *fake) Batch(_ context.Context, req service.BatchRequest, _ bool) (service.BatchResult, error) {
	f.saw("Batch", req.Identity)
	return f.batch, f.err
}

func (f *fake) Approvals(_ context.Context, id *identity.Identity, _ service.ApprovalFilter) ([]apiv1.Approval, error) {
	f.saw("Approvals", id)
	return []apiv1.Approval{}, f.err
}

func (f *fake) Approval(_ context.Context, id *identity.Identity, _ string) (apiv1.Approval, error) {
	f.saw("Approval", id)
	return apiv1.Approval{}, f.err
}

func (f *fake) Approve(_ context.Context, s service.ApprovalStep) (apiv1.Approval, error) {
	f.saw("Approve", s.Identity)
	return apiv1.Approval{ID: s.ID, Comment: s.Comment, Status: apiv1.ApprovalApproved, Reasons: []string{}, Input: map[string]any{}}, f.err
}

func (f *fake) Deny(_ context.Context, s service.ApprovalStep) (apiv1.Approval, error) {
	f.saw("Deny", s.Identity)
	return apiv1.Approval{ID: s.ID, Comment: s.Comment, Status: apiv1.ApprovalDenied, Reasons: []string{}, Input: map[string]any{}}, f.err
}

func (f *fake) Answer(_ context.Context, s service.AnswerStep) (apiv1.Question, error) {
	f.saw("Answer", s.Identity)
	return apiv1.Question{ID: s.ID}, f.err
}

func (f *fake) Questions(_ context.Context, id *identity.Identity, _ service.QuestionFilter) ([]service.PendingQuestion, error) {
	f.saw("Questions", id)
	return []service.PendingQuestion{}, f.err
}

func (f *fake) CallStatus(_ context.Context, id *identity.Identity, callID string, wait time.Duration) (apiv1.CallStatus, error) {
	f.saw("CallStatus", id)
	return apiv1.CallStatus{CallID: callID, Outcome: apiv1.OutcomePending, ExpiresAt: wait.String()}, f.err
}

func (f *fake) CallQuestion(_ context.Context, id *identity.Identity, callID string) (service.AskedQuestion, error) {
	f.saw("CallQuestion", id)
	return service.AskedQuestion{CallID: callID}, f.err
}

func (f *fake) Info(_ context.Context, id *identity.Identity) (apiv1.PolicyInfo, error) {
	f.saw("Info", id)
	return apiv1.PolicyInfo{Revision: "r1", Modules: []apiv1.PolicyModule{}}, nil
}

func (f *fake) Evaluate(_ context.Context, req service.EvalRequest) (apiv1.PolicyEvalResponse, error) {
	f.saw("Evaluate", req.Admin)
	return apiv1.PolicyEvalResponse{Revision: "r1", Outcome: apiv1.OutcomeAllow, Reasons: []string{}, Rules: []apiv1.FiredRule{}}, f.err
}

func (f *fake) Replay(_ context.Context, req service.ReplayRequest) (*service.ReplayReport, error) {
	f.saw("Replay", req.Admin)
	if f.err != nil {
		return nil, f.err
	}
	return &service.ReplayReport{}, nil
}

func (f *fake) ShadowSummary(_ context.Context, req service.ShadowRequest) (service.ShadowSummary, error) {
	f.saw("ShadowSummary", req.Admin)
	return service.ShadowSummary{}, f.err
}

func (f *fake) Events(_ context.Context, id *identity.Identity, _ service.AuditFilter) (apiv1.AuditEventPage, error) {
	f.saw("Events", id)
	return apiv1.AuditEventPage{Events: []*apiv1.AuditEvent{}}, f.err
}

func (f *fake) Event(_ context.Context, id *identity.Identity, _ string) (*apiv1.AuditEvent, error) {
	f.saw("Event", id)
	return &apiv1.AuditEvent{}, f.err
}

func (f *fake) Verify(_ context.Context, id *identity.Identity) (service.VerifyResult, error) {
	f.saw("Verify", id)
	return service.VerifyResult{OK: true}, f.err
}

func (f *fake) Export(_ context.Context, id *identity.Identity, _ service.ExportRequest, emit func([]any) error) error {
	f.saw("Export", id)
	for _, b := range f.export {
		if err := emit(b); err != nil {
			return err
		}
	}
	return f.err
}

func (f *fake) Checkpoint(_ context.Context, id *identity.Identity) ([]byte, error) {
	f.saw("Checkpoint", id)
	return []byte("note\n"), f.err
}

func (f *fake) VerifierKey(_ context.Context, id *identity.Identity) (string, error) {
	f.saw("VerifierKey", id)
	return "key", f.err
}

func (f *fake) InclusionProof(_ context.Context, id *identity.Identity, _ string, _ uint64) (apiv1.InclusionProof, error) {
	f.saw("InclusionProof", id)
	return apiv1.InclusionProof{}, f.err
}

func (f *fake) ConsistencyProof(_ context.Context, id *identity.Identity, _, _ uint64) (apiv1.ConsistencyProof, error) {
	f.saw("ConsistencyProof", id)
	return apiv1.ConsistencyProof{}, f.err
}

func (f *fake) VerifyCheckpoint(_ context.Context, id *identity.Identity, _ []byte) (any, error) {
	f.saw("VerifyCheckpoint", id)
	return map[string]any{"ok": true}, f.err
}

func (f *fake) ProveEvent(_ context.Context, id *identity.Identity, _ *apiv1.AuditEvent) (service.EventProof, error) {
	f.saw("ProveEvent", id)
	return service.EventProof{Status: service.ProofVerified, CheckpointSize: 1}, f.err
}

func (f *fake) Check(context.Context) map[string]string {
	f.saw("Check", nil)
	if f.checks != nil {
		return f.checks
	}
	return map[string]string{"policy": "ok", "audit": "ok"}
}

var (
	_ service.Calls     = (*fake)(nil)
	_ service.Approvals = (*fake)(nil)
	_ service.Policy    = (*fake)(nil)
	_ service.Audit     = (*fake)(nil)
	_ service.Health    = (*fake)(nil)
)

// harness is a Server over one fake for every service, authenticating
// with rolesAuth ("Bearer roles:a,b": principal p of tenant acme).
type harness struct {
	t    *testing.T
	f    *fake
	h    http.Handler
	spec *apispec.Spec
}

func newHarness(t *testing.T, o Options) *harness {
	t.Helper()
	spec, err := apispec.Load("../../api/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := &fake{}
	o.Calls, o.Approvals, o.Policy, o.Audit, o.Health = f, f, f, f, f
	if o.Auth == nil {
		o.Auth = rolesAuth{}
	}
	if o.Gatherer == nil {
		o.Gatherer = prometheus.NewRegistry()
	}
	return &harness{t: t, f: f, h: New(o).Handler(), spec: spec}
}

// do sends one request (roles "" sends no credential; a body is sent as
// application/json) and returns the response.
func (h *harness) do(method, path, roles, body string) *http.Response {
	h.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if roles != "" {
		req.Header.Set("Authorization", "Bearer roles:"+roles)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.h.ServeHTTP(rec, req)
	return rec.Result()
}

// errorOf decodes an error body, failing the test when it is not one.
func errorOf(t *testing.T, resp *http.Response) apiv1.ErrorDetail {
	t.Helper()
	b, _ := io.ReadAll(resp.Body)
	var body apiv1.ErrorBody
	if err := json.Unmarshal(b, &body, json.RejectUnknownMembers(true)); err != nil || body.Error.Code == "" {
		t.Fatalf("%d %s is not an error body: %v", resp.StatusCode, b, err)
	}
	return body.Error
}

var errForeign = errors.New("pq: connection to 10.1.2.3:5432 refused (password=hunter2)")
