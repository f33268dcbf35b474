package api

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"
	"github.com/go-json-experiment/json"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/service"
)

// listApprovals answers GET /v1/approvals?status=&limit= for the caller's
// tenant, newest first.
func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := service.ApprovalFilter{Limit: service.ApprovalsDefaultLimit}
	for k, vs := range q {
		if len(vs) > 1 {
			writeError(w, badRequest("query parameter %s given more than once", strconv.Quote(k)))
			return
		}
		switch k {
		case "status":
			if vs[0] == "" {
				writeError(w, badRequest("status must be pending, approved, denied or expired"))
				return
			}
			f.Status = vs[0] // the service checks it
		case "limit":
			n, err := strconv.Atoi(vs[0])
			if err != nil || n < 1 { // the service checks the most
				writeError(w, badRequest("limit must be an integer from 1 to 1000"))
				return
			}
			f.Limit = n
		default:
			writeError(w, badRequest("unknown query parameter %s", strconv.Quote(truncate(k, 64))))
			return
		}
	}
	l, err := s.o.Approvals.Approvals(r.Context(), caller(r), f)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, apiv1.ApprovalList{Approvals: l})
}

func (s *Server) getApproval(w http.ResponseWriter, r *http.Request) {
	a, err := s.o.Approvals.Approval(r.Context(), caller(r), chi.URLParam(r, "id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

func (s *Server) approve(w http.ResponseWriter, r *http.Request) {
	s.approvalStep(w, r, true)
}

func (s *Server) deny(w http.ResponseWriter, r *http.Request) {
	s.approvalStep(w, r, false)
}

// approvalStep runs approve or deny and answers with the approval as it
// stands afterwards (for an approved call, with its outcome).
func (s *Server) approvalStep(w http.ResponseWriter, r *http.Request, approve bool) {
	body, rerr := readBody(w, r, s.o.MaxBodyBytes)
	var comment string
	if rerr == nil {
		comment, rerr = decodeComment(body)
	}
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	step := s.o.Approvals.Deny
	if approve {
		step = s.o.Approvals.Approve
	}
	a, err := step(r.Context(), service.ApprovalStep{Identity: caller(r), ID: chi.URLParam(r, "id"), Comment: comment})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
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
	return in.Comment, nil
}
