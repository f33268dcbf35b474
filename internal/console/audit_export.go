package console

import (
	"bufio"
	"errors"
	"mime"
	"net/http"
	"strings"

	"github.com/go-json-experiment/json"

	apiv1 "github.com/toolgate/toolgate/api/v1"
	"github.com/toolgate/toolgate/internal/service"
)

// exportInterrupted is the last line of a download that failed after its
// first byte, as GET /v1/audit/export writes it: the file cannot pass for
// a complete export.
var exportInterrupted = []byte(`{"error":{"code":"unavailable","message":"export interrupted"}}` + "\n")

// auditExport downloads the tenant's events of a time window, oldest
// first, one JSON object per line (format ndjson: the events as stored;
// opa: OPA decision-log events), exactly the bytes of GET
// /v1/audit/export. It streams batch by batch: a failure before the first
// byte is a page; after it the file ends with exportInterrupted and the
// connection is cut, so the browser reports the download failed.
func (s *Server) auditExport(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := service.ExportRequest{Format: q.Get("format")}
	if req.Format == "" {
		req.Format = apiv1.ExportNDJSON
	}
	if req.Format != apiv1.ExportNDJSON && req.Format != apiv1.ExportOPA {
		s.fail(w, r, http.StatusBadRequest, `The export format must be "ndjson" or "opa".`)
		return
	}
	from, to, problems := readWindow(strings.TrimSpace(q.Get("from")), strings.TrimSpace(q.Get("to")))
	if len(problems) > 0 {
		s.fail(w, r, http.StatusBadRequest, strings.Join(problems, " "))
		return
	}
	req.From, req.To = from, to
	id := caller(r)
	name := "toolgate-audit-" + fileSafe(id.Tenant)
	if req.Format == apiv1.ExportOPA {
		name += "-opa"
	}
	st := &downloadStream{w: w, rc: http.NewResponseController(w), filename: name + ".ndjson"}
	err := s.o.Services.Audit.Export(r.Context(), id, req, st.batch)
	switch {
	case err == nil:
		st.finish()
	case errors.Is(err, errDownloadGone) || r.Context().Err() != nil:
		s.o.Logger.Info("console: audit export ended by the client", "tenant", id.Tenant, "format", req.Format, "lines", st.lines, "err", err)
	case !st.started:
		if service.KindOf(err) != service.KindInvalid {
			s.o.Logger.Error("console: audit export failed", "tenant", id.Tenant, "format", req.Format, "err", err)
		}
		s.serviceFailure(w, r, err)
	default:
		s.o.Logger.Error("console: audit export interrupted", "tenant", id.Tenant, "format", req.Format, "lines", st.lines, "err", err)
		st.interrupt()
		panic(http.ErrAbortHandler) // no final chunk: the download fails visibly
	}
}

// fileSafe keeps a tenant name to characters every file system takes.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, s)
}

// errDownloadGone: writing to the client failed.
var errDownloadGone = errors.New("console: export client gone")

// downloadStream writes an export's lines. Headers go out with the first
// batch, so that a failure before it can still be a page.
type downloadStream struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	filename string
	bw       *bufio.Writer
	started  bool
	lines    int
}

func (st *downloadStream) start() {
	if st.started {
		return
	}
	st.started = true
	h := st.w.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": st.filename}))
	h.Set("Cache-Control", "no-store")
	st.w.WriteHeader(http.StatusOK)
	st.bw = bufio.NewWriterSize(st.w, 64<<10)
}

func (st *downloadStream) batch(lines []any) error {
	st.start()
	for _, v := range lines {
		// Deterministic, as the API's: the same window downloads the
		// same bytes.
		b, err := json.Marshal(v, json.Deterministic(true))
		if err != nil {
			return err
		}
		if _, err := st.bw.Write(append(b, '\n')); err != nil {
			return errDownloadGone
		}
		st.lines++
	}
	return st.flush()
}

func (st *downloadStream) flush() error {
	if err := st.bw.Flush(); err != nil {
		return errDownloadGone
	}
	if err := st.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return errDownloadGone
	}
	return nil
}

func (st *downloadStream) finish() {
	st.start()
	_ = st.flush()
}

func (st *downloadStream) interrupt() {
	_, _ = st.bw.Write(exportInterrupted)
	_ = st.flush()
}
