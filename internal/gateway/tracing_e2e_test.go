package gateway

import (
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/pgtest"
	"github.com/toolgate/toolgate/internal/telemetry"
	"github.com/toolgate/toolgate/internal/telemetry/otlptest"
	"github.com/toolgate/toolgate/sdk/client"
)

// Tracing end to end: a real gateway exporting to a local OTLP/HTTP
// receiver (internal/telemetry/otlptest), callers that send a W3C
// traceparent, and an upstream tool that receives one.

const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
	callerTP    = "00-" + callerTrace + "-" + callerSpan + "-01"
)

var traceIDRE = regexp.MustCompile(`^[0-9a-f]{32}$`)

// withTelemetry exports the gateway's spans to the collector at url.
func withTelemetry(url string) func(*setup) {
	return func(s *setup) { s.extraYAML += "telemetry:\n  otlp_endpoint: " + url + "\n" }
}

// noCollectorInEnv makes sure the environment names no collector, so
// that only the configuration decides.
func noCollectorInEnv(t *testing.T) {
	t.Setenv(telemetry.EnvEndpoint, "")
	t.Setenv(telemetry.EnvTracesEndpoint, "")
}

// traceSpans flushes the gateway's spans and returns those rx received of
// one trace, once its server span is among them (the server span ends
// just after the response is written, so it may trail the response).
func (h *harness) traceSpans(rx *otlptest.Receiver, traceID string) []otlptest.Span {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := h.g.tracing.ForceFlush(h.t.Context()); err != nil {
			h.t.Fatalf("flushing spans: %v", err)
		}
		spans := rx.Trace(traceID)
		for _, s := range spans {
			if s.GetKind().String() == "SPAN_KIND_SERVER" {
				return spans
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("no server span of trace %s exported; got %d spans", traceID, len(spans))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// childrenOf counts the spans whose parent is id, by name.
func childrenOf(spans []otlptest.Span, id string) map[string][]otlptest.Span {
	out := map[string][]otlptest.Span{}
	for _, s := range spans {
		if s.ParentID == id {
			out[s.GetName()] = append(out[s.GetName()], s)
		}
	}
	return out
}

// oneSpan is the one span of spans named name with parent id parent.
func oneSpan(t *testing.T, spans []otlptest.Span, name, parent string) otlptest.Span {
	t.Helper()
	got := childrenOf(spans, parent)[name]
	if len(got) != 1 {
		var all []string
		for _, s := range spans {
			all = append(all, fmt.Sprintf("%s(%s<-%s)", s.GetName(), s.SpanID, s.ParentID))
		}
		t.Fatalf("%d spans %q under %s; spans: %v", len(got), name, parent, all)
	}
	return got[0]
}

// wantStages checks that parent has exactly these stage spans as children.
func wantStages(t *testing.T, spans []otlptest.Span, parent string, want map[string]int) map[string][]otlptest.Span {
	t.Helper()
	kids := childrenOf(spans, parent)
	for name, n := range want {
		if len(kids[name]) != n {
			t.Errorf("%d %q spans under %s, want %d", len(kids[name]), name, parent, n)
		}
	}
	for name := range kids {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected span %q under %s", name, parent)
		}
	}
	return kids
}

// traceIDs returns the trace_id of each event of a call (absent: "").
func (h *harness) traceIDs(callID string) []string {
	h.t.Helper()
	evs := h.events("acme", "call_id="+callID)
	if len(evs) == 0 {
		h.t.Fatalf("no audit events for call %s", callID)
	}
	var out []string
	for _, ev := range evs {
		id, present := ev["trace_id"].(string)
		if present && id == "" {
			h.t.Fatalf("event %v has an empty trace_id member", ev["id"])
		}
		out = append(out, id)
	}
	return out
}

// traceparents lists the traceparent headers an upstream service received.
func traceparents(calls []received) []string {
	var out []string
	for _, c := range calls {
		out = append(out, c.traceparent)
	}
	return out
}

func allEqual(ids []string, want string) bool {
	for _, id := range ids {
		if id != want {
			return false
		}
	}
	return true
}

// One call, on each audit store: its spans, its events' trace_id, and
// events that verify.
func TestTracingOneCallSpansStagesAndAudit(t *testing.T) {
	noCollectorInEnv(t)
	t.Run("sqlite", func(t *testing.T) {
		tracedCall(t, "  driver: sqlite\n  dsn: audit.db\n  checkpoint_interval: 50ms\n")
	})
	t.Run("postgres", func(t *testing.T) {
		tracedCall(t, fmt.Sprintf("  driver: postgres\n  dsn: %q\n  checkpoint_interval: 50ms\n", pgtest.DSN(t)))
	})
}

func tracedCall(t *testing.T, auditYAML string) {
	rx := otlptest.New(t)
	h := start(t, withTelemetry(rx.URL), func(s *setup) { s.auditYAML = auditYAML })
	alice := h.token("acme", "alice", "developer")
	r := h.do("POST", "/v1/tools/read-file/calls", alice, []byte(`{"arguments":{"path":"docs/guide.md"}}`),
		"Traceparent", callerTP, "Tracestate", "vendor=opaque")
	if r.status != 200 || r.str("outcome") != "ok" {
		t.Fatalf("call: %d %s", r.status, r.raw)
	}
	callID := r.str("call_id")
	spans := h.traceSpans(rx, callerTrace)

	// The request span is the caller's child, named by route, with the
	// call's ids; every stage is a child of it.
	server := oneSpan(t, spans, "POST /v1/tools/{name}/calls", callerSpan)
	if server.GetKind().String() != "SPAN_KIND_SERVER" || server.Service != "toolgate" ||
		server.Attr("http.route") != "/v1/tools/{name}/calls" || server.Attr("toolgate.call_id") != callID ||
		server.Attr("toolgate.decision_id") != r.str("decision_id") || server.Attr("toolgate.outcome") != "ok" ||
		server.Attr("toolgate.tool") != "read-file" || server.Attr("toolgate.tenant") != "acme" {
		t.Fatalf("request span: %+v", server.Span)
	}
	if server.GetTraceState() != "vendor=opaque" {
		t.Errorf("tracestate %q not carried", server.GetTraceState())
	}
	kids := wantStages(t, spans, server.SpanID, map[string]int{
		"auth": 1, "availability": 1, "prepare": 1, "decide": 1, "audit": 2, "invoke": 1,
	})
	if bad := rx.Bad(); len(bad) > 0 {
		t.Fatalf("malformed exports: %v", bad)
	}

	// Both events carry the caller's trace id.
	if ids := h.traceIDs(callID); len(ids) != 2 || !allEqual(ids, callerTrace) {
		t.Fatalf("trace ids of the call's events: %v", ids)
	}
	// The stage spans are the stage timings: same boundaries, so a span's
	// length is the event's durations_us.
	var durations map[string]any
	for _, ev := range h.events("acme", "call_id="+callID) {
		if ev["phase"] == "decision" {
			durations, _ = ev["durations_us"].(map[string]any)
		}
	}
	for _, stage := range []string{"availability", "prepare", "decide"} {
		s := kids[stage][0]
		us := int64(s.GetEndTimeUnixNano()-s.GetStartTimeUnixNano()) / 1000
		if d, _ := durations[stage].(float64); int64(d) != us {
			t.Errorf("%s: span %d µs, durations_us %v", stage, us, durations[stage])
		}
	}

	// Events with a trace id verify: the whole log, a signed checkpoint,
	// and each event's inclusion proof recomputed from its JSON.
	auditor := h.token("acme", "audrey", "auditor")
	if n := h.verify("acme"); n != 2 {
		t.Fatalf("verified %d events", n)
	}
	vk := h.do("GET", "/v1/audit/checkpoint/verifier", auditor, nil)
	cp := h.checkpointAtLeast(auditor, strings.TrimSpace(string(vk.raw)), 2)
	body, _ := json.Marshal(map[string]string{"checkpoint": cp.text})
	if v := h.do("POST", "/v1/audit/verify", auditor, body); v.status != 200 || v.body["ok"] != true {
		t.Fatalf("verify against a checkpoint: %d %s", v.status, v.raw)
	}
	raw := h.do("GET", "/v1/audit/events?call_id="+callID, auditor, nil).raw
	var page struct {
		Events []jsontext.Value `json:"events"`
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		t.Fatal(err)
	}
	for _, ev := range page.Events {
		var e audit.Event
		if err := json.Unmarshal(ev, &e); err != nil {
			t.Fatal(err)
		}
		if sum, err := audit.ComputeHash(ev); err != nil || sum != e.Hash || e.TraceID != callerTrace {
			t.Fatalf("event %s: recomputed %s, %v", ev, sum, err)
		}
		// The SDK's event type keeps trace_id: re-encoded, it hashes the same.
		var sdk client.AuditEvent
		if err := json.Unmarshal(ev, &sdk); err != nil {
			t.Fatal(err)
		}
		again, _ := json.Marshal(sdk)
		if sum, err := audit.ComputeHash(again); err != nil || sum != e.Hash {
			t.Fatalf("event decoded by the SDK hashes to %s (%v), stored %s", sum, err, e.Hash)
		}
		p := h.do("GET", fmt.Sprintf("/v1/audit/events/%s/proof?size=%d", e.ID, cp.size), auditor, nil)
		if p.status != 200 {
			t.Fatalf("proof: %d %s", p.status, p.raw)
		}
		leaf, _ := hex.DecodeString(strings.TrimPrefix(e.Hash, "sha256:"))
		if err := tlog.CheckRecord(decodeHashes(t, p.body["hashes"]), cp.size, cp.root, *e.LogIndex, tlog.RecordHash(leaf)); err != nil {
			t.Fatalf("inclusion proof of %s: %v", e.ID, err)
		}
	}
}

// Without a traceparent, the gateway's own trace is in the audit log and
// in the collector; PDP-mode decisions are traced like calls.
func TestTracingGatewayStartsTheTraceWithoutATraceparent(t *testing.T) {
	noCollectorInEnv(t)
	rx := otlptest.New(t)
	h := start(t, withTelemetry(rx.URL))
	r := h.do("POST", "/v1/tools/read-file/decisions", h.token("acme", "alice", "developer"), []byte(`{"arguments":{"path":"docs/guide.md"}}`))
	if r.status != 200 || r.str("outcome") != "allow" {
		t.Fatalf("decision: %d %s", r.status, r.raw)
	}
	ids := h.traceIDs(r.str("call_id"))
	if len(ids) != 1 || !traceIDRE.MatchString(ids[0]) {
		t.Fatalf("trace ids %v", ids)
	}
	spans := h.traceSpans(rx, ids[0])
	server := oneSpan(t, spans, "POST /v1/tools/{name}/decisions", "")
	wantStages(t, spans, server.SpanID, map[string]int{"auth": 1, "availability": 1, "prepare": 1, "decide": 1, "audit": 1})
}

// A caller that did not sample its trace is not recorded (parent-based
// sampling), yet its trace id is audited and reaches the upstream tool,
// still unsampled.
func TestTracingFollowsTheCallersSampledFlag(t *testing.T) {
	noCollectorInEnv(t)
	rx := otlptest.New(t)
	h, svc := startWithUpstream(t, withTelemetry(rx.URL))
	alice := h.token("acme", "alice", "developer")
	unsampled := "00-" + callerTrace + "-" + callerSpan + "-00"
	r := h.do("POST", "/v1/tools/maintenance-window/calls", alice, []byte(`{"arguments":{"service_id":"checkout"}}`), "Traceparent", unsampled)
	if r.status != 200 || r.str("outcome") != "ok" {
		t.Fatalf("call: %d %s", r.status, r.raw)
	}
	if ids := h.traceIDs(r.str("call_id")); len(ids) != 2 || !allEqual(ids, callerTrace) {
		t.Fatalf("trace ids %v", ids)
	}
	if got := svc.received(); len(got) != 1 || !strings.HasPrefix(got[0].traceparent, "00-"+callerTrace+"-") || !strings.HasSuffix(got[0].traceparent, "-00") {
		t.Fatalf("upstream received traceparents %v", traceparents(got))
	}
	// A sampled call after it is exported; the unsampled one never is.
	r = h.do("POST", "/v1/tools/read-file/calls", alice, []byte(`{"arguments":{"path":"docs/guide.md"}}`), "Traceparent", callerTP)
	if r.status != 200 {
		t.Fatalf("call: %d %s", r.status, r.raw)
	}
	spans := h.traceSpans(rx, callerTrace)
	server := oneSpan(t, spans, "POST /v1/tools/{name}/calls", callerSpan)
	if server.Attr("toolgate.tool") != "read-file" {
		t.Fatalf("recorded the call of %q", server.Attr("toolgate.tool"))
	}
	for _, s := range spans {
		if s.GetName() == "upstream" {
			t.Fatal("the unsampled call's upstream request was recorded")
		}
	}
}

// A traceparent that is not one starts a trace of the gateway's own: the
// call runs, and nothing of the header reaches the audit log.
func TestTracingIgnoresAForgedTraceparent(t *testing.T) {
	noCollectorInEnv(t)
	rx := otlptest.New(t)
	h, svc := startWithUpstream(t, withTelemetry(rx.URL))
	alice := h.token("acme", "alice", "developer")
	for name, tp := range map[string]string{
		"garbage":           "garbage",
		"oversized":         "00-" + strings.Repeat("4bf92f3577b34da6", 2048),
		"all-zero trace id": "00-00000000000000000000000000000000-" + callerSpan + "-01",
		"upper-case hex":    "00-" + strings.ToUpper(callerTrace) + "-" + callerSpan + "-01",
		"version ff":        "ff-" + callerTrace + "-" + callerSpan + "-01",
	} {
		t.Run(name, func(t *testing.T) {
			before := len(svc.received())
			r := h.do("POST", "/v1/tools/maintenance-window/calls", alice, []byte(`{"arguments":{"service_id":"checkout"}}`), "Traceparent", tp)
			if r.status != 200 || r.str("outcome") != "ok" {
				t.Fatalf("call: %d %s", r.status, r.raw)
			}
			ids := h.traceIDs(r.str("call_id"))
			if len(ids) != 2 || !allEqual(ids, ids[0]) || !traceIDRE.MatchString(ids[0]) || strings.Contains(strings.ToLower(tp), ids[0]) {
				t.Fatalf("trace ids %v for traceparent %.80q", ids, tp)
			}
			got := svc.received()[before:]
			if len(got) != 1 || !strings.HasPrefix(got[0].traceparent, "00-"+ids[0]+"-") {
				t.Fatalf("upstream received traceparents %v; want one in the gateway's trace %s", traceparents(got), ids[0])
			}
			oneSpan(t, h.traceSpans(rx, ids[0]), "POST /v1/tools/{name}/calls", "") // a root
		})
	}
}

// The upstream tool receives the caller's trace, as a child of the
// gateway's "upstream" span, itself under "invoke".
func TestTracingPropagatesToUpstreamTools(t *testing.T) {
	noCollectorInEnv(t)
	rx := otlptest.New(t)
	h, svc := startWithUpstream(t, withTelemetry(rx.URL))
	r := h.do("POST", "/v1/tools/maintenance-window/calls", h.token("acme", "alice", "developer"),
		[]byte(`{"arguments":{"service_id":"checkout"}}`), "Traceparent", callerTP)
	if r.status != 200 || r.str("outcome") != "ok" {
		t.Fatalf("call: %d %s", r.status, r.raw)
	}
	spans := h.traceSpans(rx, callerTrace)
	server := oneSpan(t, spans, "POST /v1/tools/{name}/calls", callerSpan)
	invoke := oneSpan(t, spans, "invoke", server.SpanID)
	up := oneSpan(t, spans, "upstream", invoke.SpanID)
	if up.GetKind().String() != "SPAN_KIND_CLIENT" {
		t.Fatalf("upstream span kind %s", up.GetKind())
	}
	got := svc.received()
	if len(got) != 1 || got[0].traceparent != "00-"+callerTrace+"-"+up.SpanID+"-01" {
		t.Fatalf("upstream received traceparents %v; want the upstream span %s in the caller's trace", traceparents(got), up.SpanID)
	}
	if ids := h.traceIDs(r.str("call_id")); len(ids) != 2 || !allEqual(ids, callerTrace) {
		t.Fatalf("trace ids %v", ids)
	}
}

// With no collector configured nothing is recorded or exported, yet the
// caller's trace id is audited and reaches upstream tools unchanged.
func TestTracingOffStillCarriesTheCallersTrace(t *testing.T) {
	noCollectorInEnv(t)
	var logs syncBuffer
	h, svc := startWithUpstream(t, func(s *setup) { s.logTo = &logs })
	if h.g.tracing.Enabled() || h.g.tracing.Provider() != nil {
		t.Fatal("tracing is on without a collector")
	}
	alice := h.token("acme", "alice", "developer")
	call := func(header ...string) (response, received) {
		t.Helper()
		before := len(svc.received())
		r := h.do("POST", "/v1/tools/maintenance-window/calls", alice, []byte(`{"arguments":{"service_id":"checkout"}}`), header...)
		if r.status != 200 || r.str("outcome") != "ok" {
			t.Fatalf("call: %d %s", r.status, r.raw)
		}
		got := svc.received()[before:]
		if len(got) != 1 {
			t.Fatalf("service saw %d calls", len(got))
		}
		return r, got[0]
	}
	// No span of the gateway's: the service sees the caller's own parent.
	r, got := call("Traceparent", callerTP, "Tracestate", "vendor=opaque")
	if got.traceparent != callerTP {
		t.Fatalf("upstream received %q, want %q", got.traceparent, callerTP)
	}
	if ids := h.traceIDs(r.str("call_id")); len(ids) != 2 || !allEqual(ids, callerTrace) {
		t.Fatalf("trace ids %v", ids)
	}
	// The request's log line leads to the trace too.
	if !strings.Contains(logs.String(), "call_id="+r.str("call_id")+" decision_id="+r.str("decision_id")+" trace_id="+callerTrace) {
		t.Fatalf("no request log line with the trace id; log:\n%s", logs.String())
	}
	// Without one, or with a forged one, there is no trace at all.
	for _, header := range [][]string{nil, {"Traceparent", "garbage"}, {"Traceparent", "00-" + strings.Repeat("f", 40000)}} {
		r, got := call(header...)
		if got.traceparent != "" {
			t.Fatalf("upstream received traceparent %q", got.traceparent)
		}
		if ids := h.traceIDs(r.str("call_id")); !allEqual(ids, "") {
			t.Fatalf("trace ids %v without a valid traceparent", ids)
		}
	}
	h.verify("acme")
}

// A batch is one trace: a "call" span per call under the request's span,
// each with its own stages.
func TestTracingBatchSpanPerCall(t *testing.T) {
	noCollectorInEnv(t)
	rx := otlptest.New(t)
	h := start(t, withTelemetry(rx.URL))
	r := h.do("POST", "/v1/batches", h.token("acme", "alice", "developer"), []byte(`{"session_id":"s-1","calls":[
		{"tool":"read-file","arguments":{"path":"docs/guide.md"}},
		{"tool":"read-file","arguments":{"path":"notes/todo.txt"}},
		{"tool":"no-such-tool","arguments":{}}]}`), "Traceparent", callerTP)
	if r.status != 200 {
		t.Fatalf("batch: %d %s", r.status, r.raw)
	}
	results := r.body["results"].([]any)
	spans := h.traceSpans(rx, callerTrace)
	server := oneSpan(t, spans, "POST /v1/batches", callerSpan)
	calls := wantStages(t, spans, server.SpanID, map[string]int{"auth": 1, "call": 3})["call"]
	byID := map[string]otlptest.Span{}
	for _, c := range calls {
		byID[c.Attr("toolgate.call_id")] = c
	}
	// Availability is decided once per distinct tool (under the first call
	// naming it), and again for each call that gets its slot to run.
	availability := []int{2, 1, 1}
	for i, res := range results {
		m := res.(map[string]any)
		c, ok := byID[m["call_id"].(string)]
		if !ok || c.Attr("toolgate.outcome") != m["outcome"] {
			t.Fatalf("call %d (%v): span %+v", i, m, c.Span)
		}
		kids := childrenOf(spans, c.SpanID)
		want := map[string]int{"availability": availability[i], "prepare": 1, "decide": 1, "audit": 2, "invoke": 1}
		if i == 2 {
			want = map[string]int{"availability": 1, "audit": 1} // unavailable: refused before prepare
			if c.Attr("toolgate.tool") != "unknown" {
				t.Errorf("an unknown tool's name reached a span: %q", c.Attr("toolgate.tool"))
			}
		}
		for name, n := range want {
			if len(kids[name]) != n {
				t.Errorf("call %d: %d %q spans, want %d", i, len(kids[name]), name, n)
			}
		}
		if ids := h.traceIDs(m["call_id"].(string)); !allEqual(ids, callerTrace) {
			t.Errorf("call %d: trace ids %v", i, ids)
		}
	}
}

// Shutdown sends the spans still queued: with the batcher's delay at an
// hour, only the flush on close can have exported them.
func TestTracingShutdownFlushesSpans(t *testing.T) {
	noCollectorInEnv(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "3600000")
	rx := otlptest.New(t)
	h := start(t, withTelemetry(rx.URL))
	r := h.do("POST", "/v1/tools/read-file/calls", h.token("acme", "alice", "developer"),
		[]byte(`{"arguments":{"path":"docs/guide.md"}}`), "Traceparent", callerTP)
	if r.status != 200 {
		t.Fatalf("call: %d %s", r.status, r.raw)
	}
	if n := len(rx.Spans()); n != 0 {
		t.Fatalf("%d spans exported before shutdown; the test needs them queued", n)
	}
	h.stop()
	if err := h.g.Close(); err != nil {
		t.Fatal(err)
	}
	oneSpan(t, rx.Trace(callerTrace), "POST /v1/tools/{name}/calls", callerSpan)
}

// The cost of tracing when it is on: the same benchmark as
// BenchmarkHandlerDecisionReadFileParallel/cache, every request recorded
// and exported to a loopback collector, each with the caller's sampled
// traceparent (off, that benchmark is the baseline).
//
// go test -run '^$' -bench 'Traced' -benchtime 3s ./internal/gateway/
func BenchmarkHandlerDecisionReadFileParallelTraced(b *testing.B) {
	b.Setenv(telemetry.EnvEndpoint, "")
	b.Setenv(telemetry.EnvTracesEndpoint, "")
	rx := otlptest.New(b)
	size := 4096
	benchHandlerWith(b, func(s *setup) {
		s.cacheSize = &size
		withTelemetry(rx.URL)(s)
	}, "/v1/tools/read-file/decisions", readBody, true, "Traceparent", callerTP)
}
