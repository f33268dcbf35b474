package gateway

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// An upstream's declared permanent failure inside a batch ends the batch
// with the 424 a single call gets: the failing call ran (both events
// audited), the sibling still running is canceled and says its effects
// are not undone.
func TestBatchUpstreamPermanentFailureAnswers424AndCancelsSiblings(t *testing.T) {
	t.Parallel()
	// The service skips assertion checks: upstream_e2e_test covers them.
	slowArrived := make(chan struct{})
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case strings.Contains(string(body), `"slow"`):
			close(slowArrived)
			<-r.Context().Done() // until the gateway cancels it
		case strings.Contains(string(body), `"legacy"`):
			select {
			case <-slowArrived: // the sibling is running now
			case <-time.After(30 * time.Second):
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			io.WriteString(w, `{"permanent":true,"detail":"legacy was decommissioned in 2023"}`)
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(svc.Close)
	h := start(t, withUpstream(svc.URL+"/maintenance-window"), func(s *setup) {
		// The running sibling must be canceled by the batch, not by its
		// own deadline.
		s.toolsYAML = strings.Replace(s.toolsYAML, "timeout: 2s", "timeout: 60s", 1)
	})
	oncall := h.token("acme", "bob", "oncall")
	r := h.do("POST", "/v1/batches", oncall, []byte(`{"calls":[
		{"tool":"maintenance-window","arguments":{"service_id":"slow"},"call_id":"b-slow"},
		{"tool":"maintenance-window","arguments":{"service_id":"legacy"},"call_id":"b-legacy"}
	]}`))
	if r.status != http.StatusFailedDependency || r.errCode() != "permanent_failure" || strings.Contains(string(r.raw), "decommissioned") {
		t.Fatalf("batch: %d %s, want the 424 a single call gets", r.status, r.raw)
	}
	res := r.results(t)
	failure, _ := res[1]["error"].(map[string]any)
	if res[1]["call_id"] != "b-legacy" || res[1]["decision_id"] == "" || failure["code"] != "permanent_failure" {
		t.Fatalf("initiating call's entry %v, want its permanent_failure", res[1])
	}
	data, _ := res[0]["data"].(map[string]any)
	if res[0]["outcome"] != "canceled" || res[0]["content"] != "canceled" || data["started"] != true || data["effects"] == nil {
		t.Fatalf("running sibling %v, want canceled, started, effects not undone", res[0])
	}

	ev := h.events("acme", "call_id=b-legacy")
	if len(ev) != 2 || ev[0]["phase"] != "result" || ev[0]["outcome"] != "tool_error" ||
		!strings.Contains(ev[0]["result"].(map[string]any)["error"].(string), "legacy was decommissioned") || ev[1]["outcome"] != "allow" {
		t.Fatalf("permanent failure events %v", ev)
	}
	ev = h.events("acme", "call_id=b-slow")
	if len(ev) != 2 || ev[0]["phase"] != "result" || ev[0]["outcome"] != "canceled" || ev[1]["outcome"] != "allow" {
		t.Fatalf("canceled sibling's events %v", ev)
	}
	h.verify("acme")
}
