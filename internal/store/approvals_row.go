package store

import (
	"fmt"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/approval"
)

// approvalRequest is the immutable part of an approval, stored as one JSON value
// beside the columns that queries and transitions use.
type approvalRequest struct {
	DecisionID     string         `json:"decision_id"`
	SessionID      string         `json:"session_id"`
	Client         string         `json:"client"`
	Action         string         `json:"action"`
	Digest         string         `json:"digest"`
	PolicyRevision string         `json:"policy_revision"`
	Document       map[string]any `json:"document"`
	Input          map[string]any `json:"input"`
	Reasons        []string       `json:"reasons"`
	Obligations    map[string]any `json:"obligations,omitempty"`
}

func encodeRequest(a *approval.Approval) ([]byte, error) {
	b, err := json.Marshal(approvalRequest{
		DecisionID: a.DecisionID, SessionID: a.SessionID, Client: a.Client, Action: a.Action,
		Digest: a.Digest, PolicyRevision: a.PolicyRevision, Document: a.Document, Input: a.Input,
		Reasons: a.Reasons, Obligations: a.Obligations,
	}, json.Deterministic(true))
	if err != nil {
		return nil, fmt.Errorf("approval: encode: %w", err)
	}
	return b, nil
}

// approvalRow is one stored approval as read.
type approvalRow struct {
	id, tenant, callID, principal, tool, status string
	createdMS, expiresMS, decidedMS             int64
	decidedBy, comment, outcome                 string
	request, result                             []byte
}

func (r *approvalRow) approval() (*approval.Approval, error) {
	var req approvalRequest
	if err := json.Unmarshal(r.request, &req); err != nil {
		return nil, fmt.Errorf("approval: stored request of %s: %w", r.id, err)
	}
	a := &approval.Approval{
		ID: r.id, Tenant: r.tenant, CallID: r.callID, Principal: r.principal, Tool: r.tool,
		DecisionID: req.DecisionID, SessionID: req.SessionID, Client: req.Client, Action: req.Action,
		Digest: req.Digest, PolicyRevision: req.PolicyRevision, Document: req.Document, Input: req.Input,
		Reasons: req.Reasons, Obligations: req.Obligations,
		CreatedAt: time.UnixMilli(r.createdMS).UTC(), ExpiresAt: time.UnixMilli(r.expiresMS).UTC(),
		Status: r.status, DecidedBy: r.decidedBy, Comment: r.comment, Outcome: r.outcome,
	}
	if a.Reasons == nil {
		a.Reasons = []string{}
	}
	if r.decidedMS > 0 {
		a.DecidedAt = time.UnixMilli(r.decidedMS).UTC()
	}
	if len(r.result) > 0 {
		var res approval.Result
		if err := json.Unmarshal(r.result, &res); err != nil {
			return nil, fmt.Errorf("approval: stored result of %s: %w", r.id, err)
		}
		a.Result = &res
	}
	return a, nil
}

func encodeResult(r approval.Result) ([]byte, error) {
	b, err := json.Marshal(r, json.Deterministic(true))
	if err != nil {
		return nil, fmt.Errorf("approval: encode result: %w", err)
	}
	return b, nil
}
