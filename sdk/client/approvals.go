package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	apiv1 "github.com/toolgate/toolgate/api/v1"
)

// Approval is a call held for a human (role approver).
type Approval = apiv1.Approval

// ApprovalQuery filters Approvals. Zero fields do not filter.
type ApprovalQuery struct {
	Status string // pending, approved, denied or expired
	Limit  int    // 1..1000, default 100
}

// Approvals lists the tenant's held calls, newest first.
func (c *Client) Approvals(ctx context.Context, q ApprovalQuery) ([]Approval, error) {
	v := url.Values{}
	if q.Status != "" {
		v.Set("status", q.Status)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out apiv1.ApprovalList
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/approvals", query: v}, &out); err != nil {
		return nil, err
	}
	return out.Approvals, nil
}

// Approval returns one held call (ErrNotFound when there is none in the
// caller's tenant).
func (c *Client) Approval(ctx context.Context, id string) (*Approval, error) {
	var out Approval
	if err := c.do(ctx, request{method: http.MethodGet, path: "/v1/approvals/" + seg(id)}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Approve approves a held call: the gateway decides it again with the
// approver in input.approval and, when policy allows, runs the frozen call
// once. The answer is the approval as it stands afterwards (with the
// run's Outcome). An approval already decided or expired is ErrConflict;
// a policy refusal of the approver is ErrForbidden.
func (c *Client) Approve(ctx context.Context, id, comment string) (*Approval, error) {
	return c.approvalStep(ctx, id, "approve", comment)
}

// Deny denies a held call; nothing runs.
func (c *Client) Deny(ctx context.Context, id, comment string) (*Approval, error) {
	return c.approvalStep(ctx, id, "deny", comment)
}

func (c *Client) approvalStep(ctx context.Context, id, step, comment string) (*Approval, error) {
	var out Approval
	err := c.do(ctx, request{method: http.MethodPost, path: "/v1/approvals/" + seg(id) + "/" + step,
		body: apiv1.ApprovalStep{Comment: comment}}, &out)
	if err != nil {
		return nil, err
	}
	return &out, nil
}
