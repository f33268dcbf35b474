package api

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/decision"
	"github.com/toolgate/toolgate/internal/replay"
)

// replayWindow is how far back POST /v1/policy/replay looks without "from".
const replayWindow = 7 * 24 * time.Hour

// maxReplayModules bounds the modules of an inline candidate.
const maxReplayModules = 200

var moduleName = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}\.rego$`)

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
		writeError(w, rerr.status, rerr.code, rerr.message)
		return
	}
	var in replayBody
	if err := json.Unmarshal(body, &in, json.RejectUnknownMembers(true)); err != nil {
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, `body must be {"modules":{"name.rego":"…"},"data":{…},"from","to"} or {"candidate":"shadow","from","to"}`)
		return
	}
	opts := replay.Options{Tenants: []string{identity(r).Tenant}, From: time.Now().Add(-replayWindow)}
	for _, tb := range []struct {
		name, v string
		dst     *time.Time
	}{{"from", in.From, &opts.From}, {"to", in.To, &opts.To}} {
		if tb.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, tb.v)
		if err != nil {
			writeError(w, http.StatusBadRequest, CodeInvalidRequest, tb.name+" must be an RFC 3339 time")
			return
		}
		*tb.dst = t
	}

	var rev *decision.Revision
	switch {
	case in.Candidate == "shadow" && len(in.Modules) == 0 && in.Data == nil:
		eng := s.o.Pipeline.ShadowEngine()
		if eng == nil {
			writeError(w, http.StatusBadRequest, CodeInvalidRequest, "no shadow policy is configured (policy.shadow)")
			return
		}
		var err error
		if rev, err = eng.Current(); err != nil {
			writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "the shadow policy is not loaded")
			return
		}
	case in.Candidate == "" && len(in.Modules) > 0:
		var msg string
		rev, msg = compileCandidate(r.Context(), in.Modules, in.Data)
		if rev == nil {
			writeError(w, http.StatusBadRequest, CodeInvalidRequest, msg)
			return
		}
	default:
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, `give either "modules" (and optional "data") or "candidate":"shadow"`)
		return
	}
	rep, err := replay.Run(r.Context(), s.o.Audit, rev, opts)
	if err != nil {
		s.o.Logger.Error("policy replay failed", "err", err)
		if errors.Is(err, context.Canceled) {
			return
		}
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "audit log is unavailable")
		return
	}
	s.o.Logger.Info("policy replayed by an administrator", "tenant", identity(r).Tenant, "principal", identity(r).Principal,
		"candidate", rep.Candidate, "events", rep.Events, "changed", rep.Changed)
	writeJSON(w, http.StatusOK, rep)
}

// compileCandidate compiles inline modules in a temporary folder with the
// engine's own loader and checks, so a candidate is judged exactly as a
// policy folder would be. The message is safe to return (file:line
// problems of the caller's own modules).
func compileCandidate(ctx context.Context, modules map[string]string, data map[string]any) (*decision.Revision, string) {
	if len(modules) > maxReplayModules {
		return nil, "too many modules"
	}
	dir, err := os.MkdirTemp("", "toolgate-replay-")
	if err != nil {
		return nil, "cannot stage the candidate policy"
	}
	defer os.RemoveAll(dir)
	for name, src := range modules {
		if !moduleName.MatchString(name) {
			return nil, "module names must be plain file names ending in .rego"
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			return nil, "cannot stage the candidate policy"
		}
	}
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			return nil, "data is not JSON"
		}
		if err := os.WriteFile(filepath.Join(dir, "data.json"), b, 0o600); err != nil {
			return nil, "cannot stage the candidate policy"
		}
	}
	eng := decision.NewEngine(decision.Options{Dir: dir})
	if err := eng.Load(ctx); err != nil {
		return nil, "candidate policy rejected: " + err.Error()
	}
	rev, _ := eng.Current()
	return rev, ""
}
