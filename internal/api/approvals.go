package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"
	"github.com/go-json-experiment/json"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/approval"
	"github.com/toolgate/toolgate/internal/audit"
	"github.com/toolgate/toolgate/internal/pipeline"
)

// CodeConflict: the approval was already decided or has expired.
const CodeConflict = "conflict"

// maxComment bounds an approver's comment (bytes).
const maxComment = 1000

// approvalView is an approval as approvers see it: the masked request
// document, never the stored unmasked one.
type approvalView = apiv1.Approval

func viewOf(a *approval.Approval) approvalView {
	v := approvalView{
		ID: a.ID, CallID: a.CallID, DecisionID: a.DecisionID, SessionID: a.SessionID, Tool: a.Tool, Action: a.Action,
		Principal: a.Principal, Status: a.Status, Outcome: a.Outcome, Reasons: a.Reasons, RequestDigest: a.Digest,
		PolicyRevision: a.PolicyRevision, Input: a.Input, CreatedAt: audit.FormatTime(a.CreatedAt),
		ExpiresAt: audit.FormatTime(a.ExpiresAt), DecidedBy: a.DecidedBy, Comment: a.Comment,
	}
	if !a.DecidedAt.IsZero() {
		v.DecidedAt = audit.FormatTime(a.DecidedAt)
	}
	if v.Reasons == nil {
		v.Reasons = []string{}
	}
	if v.Input == nil {
		v.Input = map[string]any{}
	}
	return v
}

var approvalStatuses = map[string]bool{
	approval.StatusPending: true, approval.StatusApproved: true, approval.StatusDenied: true, approval.StatusExpired: true,
}

// listApprovals answers GET /v1/approvals?status=&limit= for the caller's
// tenant, newest first.
func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := approval.Filter{Limit: approval.DefaultLimit}
	for k, vs := range q {
		if len(vs) > 1 {
			writeError(w, http.StatusBadRequest, CodeInvalidRequest, "query parameter "+strconv.Quote(k)+" given more than once")
			return
		}
		switch k {
		case "status":
			if !approvalStatuses[vs[0]] {
				writeError(w, http.StatusBadRequest, CodeInvalidRequest, "status must be pending, approved, denied or expired")
				return
			}
			f.Status = vs[0]
		case "limit":
			n, err := strconv.Atoi(vs[0])
			if err != nil || n < 1 || n > approval.MaxLimit {
				writeError(w, http.StatusBadRequest, CodeInvalidRequest, "limit must be an integer from 1 to 1000")
				return
			}
			f.Limit = n
		default:
			writeError(w, http.StatusBadRequest, CodeInvalidRequest, "unknown query parameter "+strconv.Quote(truncate(k, 64)))
			return
		}
	}
	l, err := s.o.Pipeline.Approvals(r.Context(), identity(r), f)
	if err != nil {
		s.writeApprovalError(w, err)
		return
	}
	out := apiv1.ApprovalList{Approvals: make([]approvalView, 0, len(l))}
	for _, a := range l {
		out.Approvals = append(out.Approvals, viewOf(a))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getApproval(w http.ResponseWriter, r *http.Request) {
	a, err := s.o.Pipeline.Approval(r.Context(), identity(r), chi.URLParam(r, "id"))
	if err != nil {
		s.writeApprovalError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, viewOf(a))
}

func (s *Server) approve(w http.ResponseWriter, r *http.Request) {
	s.approvalStep(w, r, s.o.Pipeline.Approve)
}

func (s *Server) deny(w http.ResponseWriter, r *http.Request) {
	s.approvalStep(w, r, s.o.Pipeline.Deny)
}

// approvalStep runs approve or deny and answers with the approval as it
// stands afterwards (for an approved call, with its outcome).
func (s *Server) approvalStep(w http.ResponseWriter, r *http.Request, step func(context.Context, pipeline.ApprovalStep) (*approval.Approval, error)) {
	body, rerr := readBody(w, r, s.o.MaxBodyBytes)
	var comment string
	if rerr == nil {
		comment, rerr = decodeComment(body)
	}
	if rerr != nil {
		writeError(w, rerr.status, rerr.code, rerr.message)
		return
	}
	a, err := step(r.Context(), pipeline.ApprovalStep{Identity: identity(r), ID: chi.URLParam(r, "id"), Comment: comment})
	if err != nil {
		s.writeApprovalError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, viewOf(a))
}

// decodeComment reads the optional {"comment": "..."} body of approve and
// deny, strictly.
func decodeComment(body []byte) (string, *requestError) {
	if len(strings.TrimSpace(string(body))) == 0 {
		return "", nil
	}
	var in apiv1.ApprovalStep
	if err := json.Unmarshal(body, &in, json.RejectUnknownMembers(true)); err != nil {
		return "", badRequest("body must be a JSON object with an optional string member \"comment\"")
	}
	if len(in.Comment) > maxComment || !utf8.ValidString(in.Comment) {
		return "", badRequest("comment must be at most %d bytes of UTF-8", maxComment)
	}
	return in.Comment, nil
}

func (s *Server) writeApprovalError(w http.ResponseWriter, err error) {
	var denied *pipeline.ApproverDeniedError
	switch {
	case errors.As(err, &denied):
		writeError(w, http.StatusForbidden, CodeForbidden, denied.Message)
	case errors.Is(err, pipeline.ErrApprovalNotFound):
		writeError(w, http.StatusNotFound, CodeNotFound, "no such approval")
	case errors.Is(err, pipeline.ErrApprovalDecided):
		writeError(w, http.StatusConflict, CodeConflict, "the approval was already decided")
	case errors.Is(err, pipeline.ErrApprovalExpired):
		writeError(w, http.StatusConflict, CodeConflict, "the approval has expired")
	default:
		writePipelineError(w, err)
	}
}
