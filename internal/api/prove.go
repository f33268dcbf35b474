package api

import (
	"io"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
	"github.com/go-json-experiment/json"

	apiv1 "github.com/toolgate/toolgate/api/v1"
)

// maxCheckpointBytes bounds a checkpoint note in POST /v1/audit/verify.
const maxCheckpointBytes = 16 << 10

// checkpoint answers GET /v1/audit/checkpoint: the signed note, text/plain.
func (s *Server) checkpoint(w http.ResponseWriter, r *http.Request) {
	note, err := s.o.Audit.Checkpoint(r.Context(), caller(r))
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(note)
}

// checkpointVerifier answers GET /v1/audit/checkpoint/verifier.
func (s *Server) checkpointVerifier(w http.ResponseWriter, r *http.Request) {
	key, err := s.o.Audit.VerifierKey(r.Context(), caller(r))
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, key+"\n")
}

// sizeParam reads a positive tree size from the query.
func sizeParam(r *http.Request, name string) (uint64, bool) {
	q := r.URL.Query()[name]
	if len(q) != 1 {
		return 0, false
	}
	n, err := strconv.ParseUint(q[0], 10, 64)
	return n, err == nil && n > 0
}

// onlyParams reports whether the query has no parameter but names.
func onlyParams(r *http.Request, names ...string) bool {
	for k := range r.URL.Query() {
		ok := false
		for _, n := range names {
			ok = ok || k == n
		}
		if !ok {
			return false
		}
	}
	return true
}

// eventProof answers GET /v1/audit/events/{id}/proof?size=N.
func (s *Server) eventProof(w http.ResponseWriter, r *http.Request) {
	size, ok := sizeParam(r, "size")
	if !ok || !onlyParams(r, "size") {
		writeError(w, badRequest("size: one positive integer, the tree size of a checkpoint, is required"))
		return
	}
	proof, err := s.o.Audit.InclusionProof(r.Context(), caller(r), chi.URLParam(r, "id"), size)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, proof)
}

// consistency answers GET /v1/audit/consistency?from=M&to=N.
func (s *Server) consistency(w http.ResponseWriter, r *http.Request) {
	from, ok1 := sizeParam(r, "from")
	to, ok2 := sizeParam(r, "to")
	if !ok1 || !ok2 || !onlyParams(r, "from", "to") {
		writeError(w, badRequest("from and to: one positive integer each (tree sizes, from ≤ to) are required"))
		return
	}
	proof, err := s.o.Audit.ConsistencyProof(r.Context(), caller(r), from, to)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, proof)
}

// verifyCheckpoint answers POST /v1/audit/verify {"checkpoint": NOTE}.
func (s *Server) verifyCheckpoint(w http.ResponseWriter, r *http.Request) {
	body, rerr := readBody(w, r, maxCheckpointBytes)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	var req apiv1.VerifyRequest
	if err := json.Unmarshal(body, &req, json.RejectUnknownMembers(true)); err != nil || req.Checkpoint == "" {
		writeError(w, badRequest(`the body must be {"checkpoint": "<signed note>"}`))
		return
	}
	res, err := s.o.Audit.VerifyCheckpoint(r.Context(), caller(r), []byte(req.Checkpoint))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
