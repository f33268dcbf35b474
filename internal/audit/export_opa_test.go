package audit_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/audit"
)

// opaBase is a stored write-file decision with its content masked.
func opaBase() *audit.Event {
	return &audit.Event{
		ID: "0197a000-0000-7000-8000-000000000001", Time: "2026-03-01T12:00:00.123Z",
		Tenant: "acme", Principal: "alice", CallID: "call-1", DecisionID: "dec-1", SessionID: "s-1",
		Tool: "write-file", Action: "fs.write", Phase: audit.PhaseDecision, Outcome: "allow",
		Reasons:        []string{"developers may write notes"},
		PolicyRevision: "sha256:1111111111111111111111111111111111111111111111111111111111111111",
		RequestDigest:  "sha256:2222222222222222222222222222222222222222222222222222222222222222",
		Input: map[string]any{
			"tenant": "acme", "action": "fs.write",
			"tool":      map[string]any{"name": "write-file"},
			"args":      map[string]any{"path": "notes/x.txt", "content": audit.MaskedValue},
			"resources": []any{map[string]any{"type": "file", "path": "notes/x.txt", "access": "write"}},
		},
		Obligations: map[string]any{"timeout_ms": int64(5000)},
		Decision: map[string]any{"allow": true, "approval_required": false, "reasons": []any{"developers may write notes"},
			"obligations": map[string]any{"timeout_ms": int64(5000)}, "extra": "a member the contract does not name"},
		DurationsUS: map[string]int64{"availability": 12, "prepare": 340, "decide": 1500},
		Chain:       "main", Seq: 42, PrevHash: "sha256:3333333333333333333333333333333333333333333333333333333333333333",
		Hash: "sha256:4444444444444444444444444444444444444444444444444444444444444444",
	}
}

func TestToOPAEventGolden(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(*audit.Event)
		golden string
	}{{
		name: "allowed decision with masked content",
		edit: func(*audit.Event) {},
		golden: `{
		  "decision_id": "dec-1",
		  "path": "toolgate/authz/decision",
		  "input": {"tenant": "acme", "action": "fs.write", "tool": {"name": "write-file"},
		            "args": {"path": "notes/x.txt", "content": "**masked**"},
		            "resources": [{"type": "file", "path": "notes/x.txt", "access": "write"}]},
		  "result": {"allow": true, "approval_required": false, "reasons": ["developers may write notes"],
		             "obligations": {"timeout_ms": 5000}, "extra": "a member the contract does not name"},
		  "timestamp": "2026-03-01T12:00:00.123Z",
		  "labels": {"id": "main", "version": "toolgate", "tenant": "acme"},
		  "bundles": {"toolgate": {"revision": "sha256:1111111111111111111111111111111111111111111111111111111111111111"}},
		  "masked": ["/input/args/content"],
		  "metrics": {"timer_rego_query_eval_ns": 1500000, "timer_server_handler_ns": 1852000},
		  "custom": {"event_id": "0197a000-0000-7000-8000-000000000001", "call_id": "call-1",
		             "phase": "decision", "outcome": "allow", "reasons": ["developers may write notes"],
		             "durations_us": {"availability": 12, "prepare": 340, "decide": 1500}, "seq": 42,
		             "hash": "sha256:4444444444444444444444444444444444444444444444444444444444444444"}
		}`,
	}, {
		name: "unavailable tool, no revision, no durations, nil reasons, no result",
		edit: func(ev *audit.Event) {
			ev.Outcome, ev.Tool, ev.Action, ev.PolicyRevision, ev.RequestDigest = "unavailable", "", "", "", ""
			ev.Reasons, ev.Obligations, ev.DurationsUS, ev.Decision = nil, nil, nil, nil
			ev.Input = map[string]any{"tool": map[string]any{"name": "no-such-tool"}}
			ev.Time = "2026-03-01T12:00:00.000Z"
		},
		golden: `{
		  "decision_id": "dec-1",
		  "path": "toolgate/availability/allow",
		  "input": {"tool": {"name": "no-such-tool"}},
		  "timestamp": "2026-03-01T12:00:00Z",
		  "labels": {"id": "main", "version": "toolgate", "tenant": "acme"},
		  "custom": {"event_id": "0197a000-0000-7000-8000-000000000001", "call_id": "call-1",
		             "phase": "decision", "outcome": "unavailable", "reasons": [], "seq": 42,
		             "hash": "sha256:4444444444444444444444444444444444444444444444444444444444444444"}
		}`,
	}, {
		name: "availability refused: the result is the boolean",
		edit: func(ev *audit.Event) {
			ev.Outcome, ev.Decision, ev.Obligations = "unavailable", false, nil
			ev.Input = map[string]any{"tool": map[string]any{"name": "write-file"}}
			ev.DurationsUS = map[string]int64{"availability": 7}
		},
		golden: `{
		  "decision_id": "dec-1",
		  "path": "toolgate/availability/allow",
		  "input": {"tool": {"name": "write-file"}},
		  "result": false,
		  "timestamp": "2026-03-01T12:00:00.123Z",
		  "labels": {"id": "main", "version": "toolgate", "tenant": "acme"},
		  "bundles": {"toolgate": {"revision": "sha256:1111111111111111111111111111111111111111111111111111111111111111"}},
		  "metrics": {"timer_rego_query_eval_ns": 7000, "timer_server_handler_ns": 7000},
		  "custom": {"event_id": "0197a000-0000-7000-8000-000000000001", "call_id": "call-1",
		             "phase": "decision", "outcome": "unavailable", "reasons": ["developers may write notes"],
		             "durations_us": {"availability": 7}, "seq": 42,
		             "hash": "sha256:4444444444444444444444444444444444444444444444444444444444444444"}
		}`,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := opaBase()
			tc.edit(ev)
			got, err := json.Marshal(audit.ToOPAEvent(ev))
			if err != nil {
				t.Fatal(err)
			}
			if c, w := canonical(t, got), canonical(t, []byte(tc.golden)); c != w {
				t.Fatalf("OPA event\n got: %s\nwant: %s", c, w)
			}
		})
	}
}

func canonical(t *testing.T, b []byte) string {
	t.Helper()
	v := jsontext.Value(slices.Clone(b))
	if err := v.Canonicalize(); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return string(v)
}

func TestToOPAEventPathFollowsTheOutcomeAndResultIsThePolicys(t *testing.T) {
	denied := map[string]any{"allow": false, "reasons": []any{"no"}, "message": "no"}
	for _, tc := range []struct {
		outcome  string
		decision any
		path     string
	}{
		{"allow", opaBase().Decision, audit.OPAPathAuthz},
		{"denied", denied, audit.OPAPathAuthz},
		{"approval_required", map[string]any{"allow": true, "approval_required": true}, audit.OPAPathAuthz},
		{"invalid_arguments", nil, audit.OPAPathAuthz},
		{"unavailable", false, audit.OPAPathAvailability},
	} {
		ev := opaBase()
		ev.Outcome, ev.Decision = tc.outcome, tc.decision
		o := audit.ToOPAEvent(ev)
		got, _ := json.Marshal(o.Result, json.Deterministic(true))
		want, _ := json.Marshal(tc.decision, json.Deterministic(true))
		if o.Path != tc.path || string(got) != string(want) || o.Custom.Outcome != tc.outcome {
			t.Errorf("%s: path %q result %s, want %q %s", tc.outcome, o.Path, got, tc.path, want)
		}
		line, _ := json.Marshal(o)
		var m map[string]any
		json.Unmarshal(line, &m)
		if _, has := m["result"]; has != (tc.decision != nil) {
			t.Errorf("%s: result member present %v, want %v: %s", tc.outcome, has, tc.decision != nil, line)
		}
		if _, has := m["outcome"]; has {
			t.Errorf("%s: the OPA event has an outcome member beside OPA's: %s", tc.outcome, line)
		}
	}
}

func TestToOPAEventTimestampHasNanosecondForm(t *testing.T) {
	for in, want := range map[string]string{
		"2026-03-01T12:00:00.123Z":      "2026-03-01T12:00:00.123Z",
		"2026-03-01T12:00:00.100Z":      "2026-03-01T12:00:00.1Z",
		"2026-03-01T14:00:00.250+02:00": "2026-03-01T12:00:00.25Z",
		"not a time":                    "not a time",
	} {
		ev := opaBase()
		ev.Time = in
		if got := audit.ToOPAEvent(ev).Timestamp; got != want {
			t.Errorf("timestamp of %q = %q, want %q", in, got, want)
		}
	}
}

func TestToOPAEventDoesNotModifyTheEvent(t *testing.T) {
	ev := opaBase()
	before, _ := json.Marshal(ev, json.Deterministic(true))
	audit.ToOPAEvent(ev)
	if after, _ := json.Marshal(ev, json.Deterministic(true)); string(after) != string(before) {
		t.Fatalf("event changed:\n%s\n%s", before, after)
	}
}

func TestMaskedPointers(t *testing.T) {
	m := audit.MaskedValue
	doc := map[string]any{
		"args": map[string]any{
			"content": m, "path": "x", "a/b": m, "t~x": m,
			"headers": []any{"keep", m, map[string]any{"v": m}},
		},
		"top":   m,
		"count": float64(3),
		"nil":   nil,
		"text":  "**masked** but longer",
	}
	want := []string{"/input/args/a~1b", "/input/args/content", "/input/args/headers/1", "/input/args/headers/2/v", "/input/args/t~0x", "/input/top"}
	if got := audit.MaskedPointers(doc, "/input"); !slices.Equal(got, want) {
		t.Fatalf("MaskedPointers = %v, want %v", got, want)
	}
	if got := audit.MaskedPointers(nil, "/input"); got == nil || len(got) != 0 {
		t.Fatalf("MaskedPointers(nil) = %#v, want an empty list", got)
	}
	// Every pointer Mask applies is found again, in the event's terms.
	masked := audit.Mask(map[string]any{"args": map[string]any{"content": "secret", "path": "p"}}, []string{"/args/content"})
	if got := audit.MaskedPointers(masked, "/input"); !slices.Equal(got, []string{"/input/args/content"}) {
		t.Fatalf("pointers of a Mask result = %v", got)
	}
}

// An event's trace id is OPA's own trace_id field; without one the field
// is absent, as OPA omits it.
func TestToOPAEventTraceID(t *testing.T) {
	ev := opaBase()
	ev.TraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	got, err := json.Marshal(audit.ToOPAEvent(ev))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatal(err)
	}
	if m["trace_id"] != ev.TraceID {
		t.Fatalf("trace_id %v in %s", m["trace_id"], got)
	}
	if custom, _ := m["custom"].(map[string]any); custom["trace_id"] != nil {
		t.Fatal("trace_id repeated under custom")
	}
	ev.TraceID = ""
	if got, _ = json.Marshal(audit.ToOPAEvent(ev)); strings.Contains(string(got), "trace_id") {
		t.Fatalf("an event without a trace id: %s", got)
	}
}
