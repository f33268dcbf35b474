package api

import (
	"bufio"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/service"
)

// Export formats (GET /v1/audit/export?format=).
const (
	ExportNDJSON = apiv1.ExportNDJSON
	ExportOPA    = apiv1.ExportOPA
)

// exportInterrupted is the last line of an export that failed after its
// first byte: the status is already sent, so the body says it.
var exportInterrupted = []byte(`{"error":{"code":"unavailable","message":"export interrupted"}}` + "\n")

// exportEvents answers GET /v1/audit/export: the caller's tenant's events,
// oldest first, one JSON object per line, flushed batch by batch. Only one
// batch (at most 1000 events) is in memory at a time.
//
// Anything that fails before the first byte is a normal JSON error (400,
// 503). A failure after it ends the stream with exportInterrupted, and is
// logged; a client that went away is only logged.
func (s *Server) exportEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for k := range q {
		switch k {
		case "format", "from", "to":
		default:
			writeError(w, badRequest("unknown query parameter %s", strconv.Quote(truncate(k, 64))))
			return
		}
		if len(q[k]) > 1 {
			writeError(w, badRequest("query parameter %s given more than once", strconv.Quote(k)))
			return
		}
	}
	format := q.Get("format")
	if format == "" {
		format = ExportNDJSON
	}
	req := service.ExportRequest{Format: format}
	if format != ExportNDJSON && format != ExportOPA {
		writeError(w, badRequest(`format must be "ndjson" or "opa"`))
		return
	}
	for _, tb := range []struct {
		name string
		dst  *time.Time
	}{{"from", &req.From}, {"to", &req.To}} {
		if v := q.Get(tb.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				writeError(w, badRequest("%s must be an RFC 3339 time", tb.name))
				return
			}
			*tb.dst = t
		}
	}

	tenant := caller(r).Tenant
	st := &exportStream{w: w, rc: http.NewResponseController(w)}
	err := s.o.Audit.Export(r.Context(), caller(r), req, st.batch)
	switch {
	case err == nil:
		st.finish()
	case errors.Is(err, errClientGone) || r.Context().Err() != nil:
		s.o.Logger.Info("audit export ended by the client", "tenant", tenant, "format", format, "lines", st.lines, "err", err)
	case !st.started:
		if service.KindOf(err) != service.KindInvalid {
			s.o.Logger.Error("audit export failed", "tenant", tenant, "format", format, "err", err)
		}
		writeError(w, err)
	default:
		s.o.Logger.Error("audit export interrupted", "tenant", tenant, "format", format, "lines", st.lines, "err", err)
		st.interrupt()
	}
}

// errClientGone: writing to the client failed; nothing more can be said.
var errClientGone = errors.New("api: export client gone")

// exportStream writes an export's lines. Headers go out with the first
// batch, so that failures before it can still be JSON errors.
type exportStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	bw      *bufio.Writer
	started bool
	lines   int
}

func (st *exportStream) start() {
	if st.started {
		return
	}
	st.started = true
	h := st.w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	st.w.WriteHeader(http.StatusOK)
	st.bw = bufio.NewWriterSize(st.w, 64<<10)
}

// batch writes one batch of lines (events, or their OPA form) and
// flushes it to the client.
func (st *exportStream) batch(lines []any) error {
	st.start()
	for _, v := range lines {
		// Deterministic: the same range exports the same bytes.
		b, err := json.Marshal(v, json.Deterministic(true))
		if err != nil {
			return err // a stored event always has a JSON form; interrupt
		}
		if _, err := st.bw.Write(append(b, '\n')); err != nil {
			return errClientGone
		}
		st.lines++
	}
	return st.flush()
}

func (st *exportStream) flush() error {
	if err := st.bw.Flush(); err != nil {
		return errClientGone
	}
	// Without a flusher (a wrapping writer that hides it), net/http still
	// sends each full chunk; only latency suffers.
	if err := st.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return errClientGone
	}
	return nil
}

// finish ends a complete export (an empty one is an empty 200 body).
func (st *exportStream) finish() {
	st.start()
	st.flush()
}

// interrupt ends a started export with the error line.
func (st *exportStream) interrupt() {
	st.bw.Write(exportInterrupted)
	st.flush()
}
