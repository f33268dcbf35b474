package v1

// Formats of GET /v1/audit/export?format=.
const (
	ExportNDJSON = "ndjson" // AuditEvent lines, exactly as stored
	ExportOPA    = "opa"    // OPAEvent lines
)

// OPAEvent is one audit event in the shape of an OPA decision-log event
// (EventV1 of github.com/open-policy-agent/opa/v1/plugins/logs), as `opa run
// --server --set decision_logs.console=true` logs it for the same query and
// input, so that tooling that ingests OPA decision logs reads Toolgate's.
// Every member is one of EventV1's; OPA's members Toolgate has no value
// for (req_id, requested_by, trace_id, span_id, query, nd_builtin_cache)
// are absent. Toolgate's own facts are under labels and custom.
type OPAEvent struct {
	DecisionID string         `json:"decision_id"`
	Path       string         `json:"path"`
	Input      map[string]any `json:"input"`
	// Result is exactly what the policy returned: the whole authorization
	// decision object, or availability's boolean. Absent, as in OPA's log
	// of an undefined result, when no policy ran (invalid arguments, an
	// unknown or withheld tool) or the event predates recorded results.
	Result    any                  `json:"result,omitzero"`
	Timestamp string               `json:"timestamp"` // RFC 3339 with nanoseconds, UTC
	Labels    map[string]string    `json:"labels"`
	Bundles   map[string]OPABundle `json:"bundles,omitempty"`
	Masked    []string             `json:"masked,omitempty"`
	Erased    []string             `json:"erased,omitempty"`
	Metrics   map[string]int64     `json:"metrics,omitempty"`
	Custom    OPACustom            `json:"custom"`
	// TraceID is OPA's own field for the W3C trace id, present when the
	// event has one.
	TraceID string `json:"trace_id,omitempty"`
	// Error is OPA's own field for a decision that failed: the policy's
	// error as OPA logs a topdown error ({code, message, location: {file,
	// row}}), present on events of outcome error.
	Error *OPAError `json:"error,omitempty"`
}

// OPAError is a failed decision's error as OPA's decision log writes it.
type OPAError struct {
	Code     string       `json:"code"`
	Message  string       `json:"message"`
	Location *OPALocation `json:"location,omitempty"`
}

// OPALocation is where in the policy an error happened.
type OPALocation struct {
	File string `json:"file"`
	Row  int    `json:"row"`
}

// OPABundle is the policy revision that decided.
type OPABundle struct {
	Revision string `json:"revision"`
}

// OPACustom carries what Toolgate knows beyond OPA's event: the audit
// event it was made from, so an auditor can check it against the verified
// log (its id, hash and place in the tenant's Merkle tree; Seq for events
// of the hash-chain era, 0 since), and the call's outcome, reasons and
// stage timings.
type OPACustom struct {
	EventID     string           `json:"event_id"`
	CallID      string           `json:"call_id"`
	Phase       string           `json:"phase"`
	Outcome     string           `json:"outcome"`
	Reasons     []string         `json:"reasons"`
	DurationsUS map[string]int64 `json:"durations_us,omitempty"`
	Seq         int64            `json:"seq"`
	Hash        string           `json:"hash"`
	LogIndex    *int64           `json:"log_index,omitempty"`
	// Approval is the event's approval member: on a held call's first
	// decision its id and expiry, on the decision made when a human
	// approved it also who (by) and their comment.
	Approval *AuditApproval `json:"approval,omitempty"`
}
