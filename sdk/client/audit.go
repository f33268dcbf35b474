package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// AuditEvent is one audit record (role auditor).
type AuditEvent struct {
	ID             string           `json:"id"`
	Time           string           `json:"time"`
	Tenant         string           `json:"tenant"`
	Principal      string           `json:"principal"`
	Client         string           `json:"client,omitempty"`
	CallID         string           `json:"call_id"`
	DecisionID     string           `json:"decision_id"`
	SessionID      string           `json:"session_id"`
	Tool           string           `json:"tool"`
	Action         string           `json:"action"`
	Phase          string           `json:"phase"`   // decision or result
	Outcome        string           `json:"outcome"` // allow, denied, … or ok, tool_error
	Reasons        []string         `json:"reasons"`
	PolicyRevision string           `json:"policy_revision"`
	RequestDigest  string           `json:"request_digest"`
	Input          map[string]any   `json:"input"` // the masked request document
	Obligations    map[string]any   `json:"obligations,omitempty"`
	Result         *AuditResult     `json:"result,omitempty"`
	DurationsUS    map[string]int64 `json:"durations_us"`
	// TraceID is the W3C trace id of the request that wrote the event
	// (the caller's traceparent, or the gateway's own trace when it
	// exports traces); absent otherwise. It is part of the hashed content.
	TraceID string `json:"trace_id,omitempty"`
	// Chain, Seq and PrevHash link events written before the tenant's
	// Merkle tree; "", 0 and "" since.
	Chain    string `json:"chain"`
	Seq      int64  `json:"seq"`
	PrevHash string `json:"prev_hash"`
	Hash     string `json:"hash"`
	// LogIndex is the event's position in its tenant's Merkle tree, once
	// integrated (normally within a second of its commit).
	LogIndex *int64 `json:"log_index,omitempty"`
}

// AuditResult summarizes what a tool returned; Error is the internal
// diagnostic of a failure (never shown to the model).
type AuditResult struct {
	IsError   bool   `json:"is_error"`
	Bytes     int    `json:"bytes"`
	Truncated bool   `json:"truncated"`
	Error     string `json:"error,omitempty"`
}

// AuditQuery filters GET /v1/audit/events. Zero fields do not filter.
type AuditQuery struct {
	Tool, Principal, Outcome, Phase string
	SessionID, CallID, DecisionID   string
	From, To                        time.Time
	Limit                           int    // 1..1000, default 100
	Cursor                          string // from AuditPage.NextCursor
}

// AuditPage is one page of events, newest first.
type AuditPage struct {
	Events     []AuditEvent `json:"events"`
	NextCursor string       `json:"next_cursor"` // empty on the last page
}

// AuditEvents queries the caller's tenant's audit log.
func (c *Client) AuditEvents(ctx context.Context, q AuditQuery) (*AuditPage, error) {
	v := url.Values{}
	for k, s := range map[string]string{
		"tool": q.Tool, "principal": q.Principal, "outcome": q.Outcome, "phase": q.Phase,
		"session_id": q.SessionID, "call_id": q.CallID, "decision_id": q.DecisionID, "cursor": q.Cursor,
	} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if !q.From.IsZero() {
		v.Set("from", q.From.UTC().Format(time.RFC3339Nano))
	}
	if !q.To.IsZero() {
		v.Set("to", q.To.UTC().Format(time.RFC3339Nano))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out AuditPage
	if err := c.do(ctx, http.MethodGet, "/v1/audit/events", v, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AuditEvent returns one event of the caller's tenant.
func (c *Client) AuditEvent(ctx context.Context, id string) (*AuditEvent, error) {
	var out AuditEvent
	if err := c.do(ctx, http.MethodGet, "/v1/audit/events/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Verification is the result of checking the tenant's log against its
// Merkle tree and latest signed checkpoint.
type Verification struct {
	OK             bool   `json:"ok"`
	EventsChecked  int64  `json:"events_checked"`
	FirstBadEvent  string `json:"first_bad_event,omitempty"`
	Problem        string `json:"problem,omitempty"`
	TreeSize       int64  `json:"tree_size"`
	CheckpointSize int64  `json:"checkpoint_size"`
	EventsPruned   int64  `json:"events_pruned,omitempty"`
}

// VerifyAudit checks the caller's tenant's log (GET /v1/audit/verify).
func (c *Client) VerifyAudit(ctx context.Context) (*Verification, error) {
	var out Verification
	if err := c.do(ctx, http.MethodGet, "/v1/audit/verify", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
