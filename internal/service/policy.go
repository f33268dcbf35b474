package service

import (
	"context"
	"slices"
	"time"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/identity"
)

// EvalRequest asks what the current revision would decide, without effect
// and without an audit event: either for a supplied request Document, or
// for a would-be call (Tool, Arguments, SessionID and a principal As of
// the administrator's tenant to impersonate), which is
// availability-checked and prepared like a real call. Explain is "",
// notes, fails or full (ValidExplain).
type EvalRequest struct {
	Admin     *identity.Identity
	Document  map[string]any // supplied request document; nil for a would-be call
	Tool      string
	Arguments []byte
	As        *identity.Identity // the impersonated principal; its tenant is Admin's
	SessionID string
	Explain   string
}

// ReplayReport is the answer of a replay (POST /v1/policy/replay).
type ReplayReport struct {
	Candidate     string                      `json:"candidate"` // the candidate revision id
	Events        int                         `json:"events"`    // decision events read
	Replayed      int                         `json:"replayed"`  // evaluated against the candidate
	Unchanged     int                         `json:"unchanged"`
	Changed       int                         `json:"changed"`
	NotReplayable ReplayGroup                 `json:"not_replayable"` // masked values matter, or the candidate failed
	Skipped       int                         `json:"skipped"`        // unavailable, invalid arguments, approvals' second decisions
	ByDirection   map[string]*ReplayGroup     `json:"by_direction"`
	ByTool        map[string]*ReplayToolGroup `json:"by_tool"`
	// Changes lists up to ReplayRequest.Changes changed decisions, newest
	// first. It is for in-process callers (the console); the JSON report
	// of POST /v1/policy/replay does not carry it.
	Changes []ReplayChange `json:"-"`
}

// ReplayGroup counts events and keeps a few of their ids.
type ReplayGroup struct {
	Count   int      `json:"count"`
	Samples []string `json:"samples"`
}

// ReplayToolGroup is one tool's changes by direction.
type ReplayToolGroup struct {
	Changed     int            `json:"changed"`
	ByDirection map[string]int `json:"by_direction"`
}

// ReplayChange is one audited decision the candidate decides otherwise.
// From and To are the short outcomes of directions (allow, deny,
// approval).
type ReplayChange struct {
	EventID   string
	Time      string
	Tool      string
	Principal string
	From, To  string
}

// ReplayRequest re-evaluates the caller's tenant's audited decisions
// between From and To against a candidate: the configured shadow policy
// (Shadow), or inline Modules (file name → Rego source) and Data.
// Changes asks the report to list up to that many changed decisions
// one by one (ReplayReport.Changes, newest first).
type ReplayRequest struct {
	Admin    *identity.Identity
	Shadow   bool
	Modules  map[string]string
	Data     map[string]any
	From, To time.Time
	Changes  int
}

// MaxReplayChanges bounds ReplayRequest.Changes.
const MaxReplayChanges = 1000

// MaxReplayModules bounds the modules of an inline candidate.
const MaxReplayModules = 200

// ShadowRequest asks how the shadow policy's verdicts, audited with each
// decision, compared with the enforced decisions of the caller's tenant
// between From and To (zero: unbounded), reading at most Max decision
// events, newest first (0 or more than MaxShadowEvents: MaxShadowEvents).
type ShadowRequest struct {
	Admin    *identity.Identity
	From, To time.Time
	Max      int
}

// MaxShadowEvents bounds the decision events ShadowSummary reads.
const MaxShadowEvents = 10000

// ShadowSummary counts shadow verdicts as the toolgate_shadow_decisions_total
// metric does, but from the caller's tenant's audit log.
type ShadowSummary struct {
	// Configured: a shadow policy is configured (policy.shadow);
	// Revision is its revision serving now ("" when none is loaded).
	Configured bool
	Revision   string
	Events     int // decision events read
	Compared   int // of them, those with a shadow verdict
	Agree      int
	// AllowToDeny: the enforced decision allowed (or held for approval),
	// the shadow denies; DenyToAllow the other way round.
	AllowToDeny int
	DenyToAllow int
	Errors      int  // the shadow policy failed to evaluate
	Truncated   bool // the window holds more decision events than were read
}

// Policy is policy administration: what serves now, what it would decide,
// and what a candidate would have decided on the audited past. Every
// method needs the policy-admin role (KindForbidden before anything is
// evaluated or read).
type Policy interface {
	// Info is the revision serving now, its modules, and the last failed
	// reload if it has not been fixed since.
	Info(ctx context.Context, id *identity.Identity) (apiv1.PolicyInfo, error)
	// Evaluate is what the current revision decides for a request
	// document or a would-be call. KindInvalid: an explain level or
	// session_id out of syntax, or a document that is not the
	// administrator's tenant's.
	Evaluate(ctx context.Context, req EvalRequest) (apiv1.PolicyEvalResponse, error)
	// Replay re-evaluates audited decisions against a candidate.
	// KindInvalid: no shadow policy, or a candidate that does not
	// compile (the message names the caller's own file:line problems);
	// KindUnavailable: the shadow policy is not loaded, or the audit log
	// cannot be read.
	Replay(ctx context.Context, req ReplayRequest) (*ReplayReport, error)
	// ShadowSummary counts how the shadow verdicts audited in a window
	// compared with the enforced decisions. KindInvalid: from after to;
	// KindUnavailable: the audit log cannot be read.
	ShadowSummary(ctx context.Context, req ShadowRequest) (ShadowSummary, error)
}

// The explain levels of EvalRequest.Explain besides "" (none).
const (
	ExplainNotes = "notes"
	ExplainFails = "fails"
	ExplainFull  = "full"
)

// ValidExplain reports whether explain is a level Evaluate accepts ("",
// notes, fails or full).
func ValidExplain(explain string) bool {
	switch explain {
	case "", ExplainNotes, ExplainFails, ExplainFull:
		return true
	}
	return false
}

// Directions lists the report's directions, sorted, for printing.
func (rep *ReplayReport) Directions() []string {
	out := make([]string, 0, len(rep.ByDirection))
	for d := range rep.ByDirection {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}
