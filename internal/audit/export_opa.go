package audit

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// OPA decision-log paths of Toolgate's two policy entrypoints.
const (
	OPAPathAuthz        = "toolgate/authz/decision"
	OPAPathAvailability = "toolgate/availability/allow"
)

// OPABundleName names the policy "bundle" whose revision an OPAEvent
// carries, and OPAVersionLabel is its labels.version.
const (
	OPABundleName   = "toolgate"
	OPAVersionLabel = "toolgate"
)

// OPAEvent is one audit event in the shape of an OPA decision-log event
// (EventV1 of github.com/open-policy-agent/opa/v1/plugins/logs), so that
// tooling that ingests OPA decision logs reads Toolgate's. trace_id is
// OPA's own field for the W3C trace id, present when the event has one.
// Fields OPA has and Toolgate has no value for (req_id, span_id, query,
// nd_builtin_cache, requested_by) are absent.
type OPAEvent struct {
	DecisionID string               `json:"decision_id"`
	Path       string               `json:"path"`
	Input      map[string]any       `json:"input"`
	Result     OPAResult            `json:"result"`
	Timestamp  string               `json:"timestamp"` // RFC 3339 with nanoseconds, UTC
	Labels     map[string]string    `json:"labels"`
	Bundles    map[string]OPABundle `json:"bundles,omitempty"`
	Masked     []string             `json:"masked"`
	Erased     []string             `json:"erased"`
	Metrics    map[string]int64     `json:"metrics,omitempty"`
	Custom     OPACustom            `json:"custom"`
	TraceID    string               `json:"trace_id,omitempty"`
}

// OPAResult is the decision an OPAEvent records. Allow is true when the call
// was allowed to run with no further step: outcome allow on a decision (and
// ok or tool_error on a result, which only exists for an allowed call);
// approval_required is not an allow.
type OPAResult struct {
	Allow       bool           `json:"allow"`
	Outcome     string         `json:"outcome"`
	Reasons     []string       `json:"reasons"`
	Obligations map[string]any `json:"obligations,omitempty"`
}

// OPABundle is the policy revision that decided.
type OPABundle struct {
	Revision string `json:"revision"`
}

// OPACustom ties an OPAEvent back to the audit event it was made from, so
// an auditor can check it against the verified log: its hash, and its
// place in the tenant's Merkle tree (Seq for events of the hash-chain
// era, 0 since).
type OPACustom struct {
	EventID  string `json:"event_id"`
	CallID   string `json:"call_id"`
	Phase    string `json:"phase"`
	Seq      int64  `json:"seq"`
	Hash     string `json:"hash"`
	LogIndex *int64 `json:"log_index,omitempty"`
}

// allowOutcomes are the outcomes of calls allowed to run.
var allowOutcomes = map[string]bool{"allow": true, "ok": true, "tool_error": true}

// ToOPAEvent maps an audit event to an OPA decision-log event:
//
//   - decision_id: the event's decision_id. OPA logs one event per decision,
//     so the opa export carries only decision-phase events; a result-phase
//     event shares its decision's id (its info is in the ndjson export).
//   - path: OPAPathAvailability for outcome unavailable (the availability
//     entrypoint refused, or the tool is unknown), OPAPathAuthz otherwise
//     (invalid_arguments is refused at the authorization stage, before
//     Rego runs; its reasons say why).
//   - input: the stored, masked request document (shared, not copied).
//   - result: {allow, outcome, reasons, obligations}; see OPAResult.
//   - timestamp: the event time, RFC 3339 with nanoseconds.
//   - labels: {"id": chain (the writing replica), "version": "toolgate",
//     "tenant"}.
//   - bundles: {"toolgate": {"revision": policy_revision}}, absent without a
//     revision.
//   - masked: OPA-style pointers into the event ("/input/args/content") of
//     every value stored as MaskedValue, sorted; the policy's pointer list is
//     not stored, so they are found by walking the input (a literal
//     "**masked**" argument is listed too). erased: always empty.
//   - metrics: durations_us as "timer_toolgate_<stage>_ns" in nanoseconds.
//   - custom: the event's id, call_id, phase, seq, hash and log_index.
//   - trace_id: the event's trace_id, absent when it has none.
func ToOPAEvent(ev *Event) OPAEvent {
	out := OPAEvent{
		DecisionID: ev.DecisionID,
		Path:       OPAPathAuthz,
		Input:      ev.Input,
		Result: OPAResult{
			Allow:       allowOutcomes[ev.Outcome],
			Outcome:     ev.Outcome,
			Reasons:     ev.Reasons,
			Obligations: ev.Obligations,
		},
		Timestamp: ev.Time,
		Labels:    map[string]string{"id": ev.Chain, "version": OPAVersionLabel, "tenant": ev.Tenant},
		Masked:    MaskedPointers(ev.Input, "/input"),
		Erased:    []string{},
		Custom:    OPACustom{EventID: ev.ID, CallID: ev.CallID, Phase: ev.Phase, Seq: ev.Seq, Hash: ev.Hash, LogIndex: ev.LogIndex},
		TraceID:   ev.TraceID,
	}
	if ev.Outcome == "unavailable" {
		out.Path = OPAPathAvailability
	}
	if out.Result.Reasons == nil {
		out.Result.Reasons = []string{}
	}
	if t, err := time.Parse(time.RFC3339Nano, ev.Time); err == nil {
		out.Timestamp = t.UTC().Format(time.RFC3339Nano)
	}
	if ev.PolicyRevision != "" {
		out.Bundles = map[string]OPABundle{OPABundleName: {Revision: ev.PolicyRevision}}
	}
	if len(ev.DurationsUS) > 0 {
		out.Metrics = make(map[string]int64, len(ev.DurationsUS))
		for stage, us := range ev.DurationsUS {
			out.Metrics["timer_toolgate_"+stage+"_ns"] = us * int64(time.Microsecond)
		}
	}
	return out
}

// MaskedPointers lists the RFC 6901 pointers, each prefixed with prefix, of
// every value in doc that is MaskedValue, sorted. It walks the JSON shapes
// a decoded event holds (map[string]any, []any); never nil.
func MaskedPointers(doc map[string]any, prefix string) []string {
	out := []string{}
	var walk func(v any, ptr string)
	walk = func(v any, ptr string) {
		switch c := v.(type) {
		case string:
			if c == MaskedValue {
				out = append(out, ptr)
			}
		case map[string]any:
			for k, kv := range c {
				walk(kv, ptr+"/"+escapePointerToken(k))
			}
		case []any:
			for i, iv := range c {
				walk(iv, ptr+"/"+strconv.Itoa(i))
			}
		}
	}
	for k, v := range doc {
		walk(v, prefix+"/"+escapePointerToken(k))
	}
	slices.Sort(out)
	return out
}

// escapePointerToken escapes one RFC 6901 reference token.
func escapePointerToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
