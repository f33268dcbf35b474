package audit

import (
	"slices"
	"strconv"
	"strings"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
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

// OPAEvent, OPABundle and OPACustom are the wire types of the opa export
// (api/v1).
type (
	OPAEvent  = apiv1.OPAEvent
	OPABundle = apiv1.OPABundle
	OPACustom = apiv1.OPACustom
)

// OPA's names for the metrics Toolgate has an equivalent of.
const (
	// OPAMetricEval is the policy evaluation (Toolgate's decide stage, or
	// availability's for the availability path).
	OPAMetricEval = "timer_rego_query_eval_ns"
	// OPAMetricHandler is the whole request up to the decision (every
	// stage Toolgate timed before the event was written).
	OPAMetricHandler = "timer_server_handler_ns"
)

// ToOPAEvent maps an audit event to an OPA decision-log event:
//
//   - decision_id: the event's decision_id. OPA logs one event per decision,
//     so the opa export carries only decision-phase events; a result-phase
//     event shares its decision's id (its info is in the ndjson export).
//   - path: OPAPathAvailability for outcome unavailable (the availability
//     entrypoint refused, or the tool is unknown), OPAPathAuthz otherwise
//     (invalid_arguments is refused at the authorization stage, before
//     Rego runs).
//   - input: the stored, masked request document (shared, not copied).
//   - result: the event's decision member, exactly; see OPAEvent.Result.
//   - timestamp: the event time, RFC 3339 with nanoseconds, UTC.
//   - labels: {"id": chain (the writing replica of hash-chain-era events,
//     "" since), "version": "toolgate", "tenant"}.
//   - bundles: {"toolgate": {"revision": policy_revision}}, absent without a
//     revision.
//   - masked: OPA-style pointers into the event ("/input/args/content") of
//     every value stored as MaskedValue, sorted, absent when there is none;
//     the policy's pointer list is not stored, so they are found by walking
//     the input (a literal "**masked**" argument is listed too). erased:
//     never (Toolgate masks, it does not erase).
//   - metrics: OPA's timer_rego_query_eval_ns (the decide stage, or
//     availability on the availability path) and timer_server_handler_ns
//     (all stages timed), in nanoseconds, when timed.
//   - custom: the event's id, call_id, phase, outcome, reasons,
//     durations_us, seq, hash, log_index and approval (a held call's id and
//     expiry; on the decision made when a human approved it, who and why).
//   - trace_id: OPA's own field, the event's W3C trace id when it has one.
//   - error: OPA's own field, on a decision policy failed to make (outcome
//     error): the error's code, message and location ({file, row}), as OPA
//     logs a topdown error; the path is availability's when the call
//     failed before it was prepared (no request digest).
//
// Only decisions policy evaluated belong in OPA's log: ExportsToOPA says
// which events are.
func ToOPAEvent(ev *Event) OPAEvent {
	out := OPAEvent{
		DecisionID: ev.DecisionID,
		Path:       OPAPathAuthz,
		Input:      ev.Input,
		Result:     ev.Decision,
		Timestamp:  ev.Time,
		Labels:     map[string]string{"id": ev.Chain, "version": OPAVersionLabel, "tenant": ev.Tenant},
		Custom: OPACustom{
			EventID: ev.ID, CallID: ev.CallID, Phase: ev.Phase, Outcome: ev.Outcome, Reasons: ev.Reasons,
			DurationsUS: ev.DurationsUS, Seq: ev.Seq, Hash: ev.Hash, LogIndex: ev.LogIndex,
			Approval: ev.Approval,
		},
		TraceID: ev.TraceID,
	}
	eval := "decide"
	switch apiv1.Outcome(ev.Outcome) {
	case apiv1.OutcomeUnavailable:
		out.Path, eval = OPAPathAvailability, "availability"
	case apiv1.OutcomeError:
		// A call that failed before it was prepared failed at
		// availability (or found no policy): no request digest.
		if ev.RequestDigest == "" {
			out.Path, eval = OPAPathAvailability, "availability"
		}
	}
	if e := ev.Error; e != nil {
		out.Error = &apiv1.OPAError{Code: e.Code, Message: e.Message}
		if i := strings.LastIndexByte(e.Location, ':'); i > 0 {
			if row, err := strconv.Atoi(e.Location[i+1:]); err == nil {
				out.Error.Location = &apiv1.OPALocation{File: e.Location[:i], Row: row}
			}
		}
	}
	if out.Custom.Reasons == nil {
		out.Custom.Reasons = []string{}
	}
	if m := MaskedPointers(ev.Input, "/input"); len(m) > 0 {
		out.Masked = m
	}
	if t, err := time.Parse(time.RFC3339Nano, ev.Time); err == nil {
		out.Timestamp = t.UTC().Format(time.RFC3339Nano)
	}
	if ev.PolicyRevision != "" {
		out.Bundles = map[string]OPABundle{OPABundleName: {Revision: ev.PolicyRevision}}
	}
	if len(ev.DurationsUS) > 0 {
		var total int64
		for _, us := range ev.DurationsUS {
			total += us
		}
		out.Metrics = map[string]int64{OPAMetricHandler: total * int64(time.Microsecond)}
		if us, ok := ev.DurationsUS[eval]; ok {
			out.Metrics[OPAMetricEval] = us * int64(time.Microsecond)
		}
	}
	return out
}

// ExportsToOPA reports whether ev belongs in the OPA export: a decision
// event policy evaluated (or failed to). An invalid_arguments event is no
// authorization decision — the arguments never reached policy — and stays
// in the ndjson export only.
func ExportsToOPA(ev *Event) bool {
	return ev.Phase == PhaseDecision && apiv1.Outcome(ev.Outcome) != apiv1.OutcomeInvalidArguments
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
