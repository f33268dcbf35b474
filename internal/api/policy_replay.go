package api

import (
	"net/http"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/service"
)

// replayWindow is how far back POST /v1/policy/replay looks without "from".
const replayWindow = 7 * 24 * time.Hour

type replayBody struct {
	Candidate string            `json:"candidate"` // "shadow", or "" with modules
	Modules   map[string]string `json:"modules"`   // file name -> Rego source
	Data      map[string]any    `json:"data"`
	From      string            `json:"from"`
	To        string            `json:"to"`
}

// replayPolicy answers POST /v1/policy/replay (policy-admin): the caller's
// tenant's audited decisions re-evaluated against a candidate policy,
// either inline modules (and data) or the configured shadow policy.
func (s *Server) replayPolicy(w http.ResponseWriter, r *http.Request) {
	body, rerr := readBody(w, r, s.o.MaxBodyBytes)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	var in replayBody
	if err := json.Unmarshal(body, &in, json.RejectUnknownMembers(true)); err != nil {
		writeError(w, badRequest(`body must be {"modules":{"name.rego":"…"},"data":{…},"from","to"} or {"candidate":"shadow","from","to"}`))
		return
	}
	req := service.ReplayRequest{Admin: caller(r), From: time.Now().Add(-replayWindow)}
	for _, tb := range []struct {
		name, v string
		dst     *time.Time
	}{{"from", in.From, &req.From}, {"to", in.To, &req.To}} {
		if tb.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, tb.v)
		if err != nil {
			writeError(w, badRequest("%s must be an RFC 3339 time", tb.name))
			return
		}
		*tb.dst = t
	}
	switch {
	case in.Candidate == "shadow" && len(in.Modules) == 0 && in.Data == nil:
		req.Shadow = true
	case in.Candidate == "" && len(in.Modules) > 0:
		req.Modules, req.Data = in.Modules, in.Data
	default:
		writeError(w, badRequest(`give either "modules" (and optional "data") or "candidate":"shadow"`))
		return
	}
	rep, err := s.o.Policy.Replay(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rep)
}
