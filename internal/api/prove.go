package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
	"github.com/go-json-experiment/json"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/tlog"
)

// Prover serves a tenant's audit log as a transparency log: signed
// checkpoints, inclusion and consistency proofs, and the check of the
// current log against a checkpoint an auditor saved (README "Proving the
// log").
type Prover interface {
	// Checkpoint is the tenant's latest checkpoint as a signed note.
	Checkpoint(ctx context.Context, tenant string) ([]byte, error)
	// VerifierKey is the note verifier key (name+hash+base64key).
	VerifierKey() string
	// InclusionProof proves the event id at tree size size.
	InclusionProof(ctx context.Context, tenant, id string, size uint64) (tlog.InclusionProof, error)
	// ConsistencyProof proves the tree of size to extends that of from.
	ConsistencyProof(ctx context.Context, tenant string, from, to uint64) (tlog.ConsistencyProof, error)
	// VerifyCheckpoint checks the current log against a saved checkpoint
	// note; its result is the JSON answer.
	VerifyCheckpoint(ctx context.Context, tenant string, note []byte) (any, error)
}

// Errors a Prover returns that are the caller's, not the server's.
var (
	// ErrProofNotFound: no such event in the tenant's tree (unknown, of
	// another tenant, or not integrated yet at that size).
	ErrProofNotFound = errors.New("not found")
	// ErrProofRange: a size beyond the current tree, or from > to.
	ErrProofRange = errors.New("size out of range")
	// ErrBadCheckpoint: the note does not open with the verifier keys or
	// names another log.
	ErrBadCheckpoint = errors.New("bad checkpoint")
)

// maxCheckpointBytes bounds a checkpoint note in POST /v1/audit/verify.
const maxCheckpointBytes = 16 << 10

func (s *Server) proverOr503(w http.ResponseWriter) Prover {
	if s.o.Prover == nil {
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "audit log is unavailable")
		return nil
	}
	return s.o.Prover
}

// proofError writes a Prover failure.
func (s *Server) proofError(w http.ResponseWriter, what string, err error) {
	switch {
	case errors.Is(err, ErrProofNotFound):
		writeError(w, http.StatusNotFound, CodeNotFound, "no such event in the log")
	case errors.Is(err, ErrProofRange):
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, "size out of range of the log")
	case errors.Is(err, ErrBadCheckpoint):
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, err.Error())
	default:
		s.o.Logger.Error("audit "+what+" failed", "err", err)
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "audit log is unavailable")
	}
}

// checkpoint answers GET /v1/audit/checkpoint: the signed note, text/plain.
func (s *Server) checkpoint(w http.ResponseWriter, r *http.Request) {
	p := s.proverOr503(w)
	if p == nil {
		return
	}
	note, err := p.Checkpoint(r.Context(), identity(r).Tenant)
	if errors.Is(err, ErrProofNotFound) {
		// Events are in the tree but no checkpoint is signed yet (within
		// audit.checkpoint_interval of the first ones): transient.
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, CodeUnavailable, "no signed checkpoint yet; retry in a second")
		return
	}
	if err != nil {
		s.proofError(w, "checkpoint", err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(note)
}

// checkpointVerifier answers GET /v1/audit/checkpoint/verifier.
func (s *Server) checkpointVerifier(w http.ResponseWriter, r *http.Request) {
	p := s.proverOr503(w)
	if p == nil {
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, p.VerifierKey()+"\n")
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
	p := s.proverOr503(w)
	if p == nil {
		return
	}
	size, ok := sizeParam(r, "size")
	if !ok || !onlyParams(r, "size") {
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, "size: one positive integer, the tree size of a checkpoint, is required")
		return
	}
	proof, err := p.InclusionProof(r.Context(), identity(r).Tenant, chi.URLParam(r, "id"), size)
	if err != nil {
		s.proofError(w, "inclusion proof", err)
		return
	}
	writeJSON(w, http.StatusOK, apiv1.InclusionProof(proof))
}

// consistency answers GET /v1/audit/consistency?from=M&to=N.
func (s *Server) consistency(w http.ResponseWriter, r *http.Request) {
	p := s.proverOr503(w)
	if p == nil {
		return
	}
	from, ok1 := sizeParam(r, "from")
	to, ok2 := sizeParam(r, "to")
	if !ok1 || !ok2 || !onlyParams(r, "from", "to") {
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, "from and to: one positive integer each (tree sizes, from ≤ to) are required")
		return
	}
	if from > to {
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, "from must not exceed to")
		return
	}
	proof, err := p.ConsistencyProof(r.Context(), identity(r).Tenant, from, to)
	if err != nil {
		s.proofError(w, "consistency proof", err)
		return
	}
	writeJSON(w, http.StatusOK, apiv1.ConsistencyProof(proof))
}

// verifyCheckpoint answers POST /v1/audit/verify {"checkpoint": NOTE}.
func (s *Server) verifyCheckpoint(w http.ResponseWriter, r *http.Request) {
	body, rerr := readBody(w, r, maxCheckpointBytes)
	if rerr != nil {
		writeError(w, rerr.status, rerr.code, rerr.message)
		return
	}
	var req apiv1.VerifyRequest
	if err := json.Unmarshal(body, &req, json.RejectUnknownMembers(true)); err != nil || req.Checkpoint == "" {
		writeError(w, http.StatusBadRequest, CodeInvalidRequest, `the body must be {"checkpoint": "<signed note>"}`)
		return
	}
	p := s.proverOr503(w)
	if p == nil {
		return
	}
	res, err := p.VerifyCheckpoint(r.Context(), identity(r).Tenant, []byte(req.Checkpoint))
	if err != nil {
		s.proofError(w, "verify", err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}
