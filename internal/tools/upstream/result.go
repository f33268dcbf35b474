package upstream

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
	"github.com/toolgate/toolgate/internal/tools"
)

// MaxToolErrorBytes bounds a model-facing error text; a longer one is not
// a declared error but a failure.
const MaxToolErrorBytes = upstreamv1.MaxToolErrorBytes

// result shapes a response into a model-facing result or a Run error.
func (t *Tool) result(resp *http.Response) (tools.Result, error) {
	name := t.spec.Name
	body, err := io.ReadAll(io.LimitReader(resp.Body, t.maxResponse+1))
	if err != nil {
		return tools.Result{}, fmt.Errorf("upstream %s: status %d, reading the body: %w", name, resp.StatusCode, err)
	}
	if int64(len(body)) > t.maxResponse {
		return tools.Result{}, fmt.Errorf("upstream %s: status %d, response larger than %d bytes", name, resp.StatusCode, t.maxResponse)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return t.success(resp.StatusCode, body)
	}
	// A non-2xx body the upstream declared: a model-facing error or a
	// permanent failure. Any other member makes it an undeclared body.
	var f upstreamv1.ErrorBody
	if err := json.Unmarshal(body, &f, json.RejectUnknownMembers(true)); err != nil {
		return tools.Result{}, fmt.Errorf("upstream %s: status %d, undeclared error body %s", name, resp.StatusCode, excerpt(body))
	}
	detail := ""
	if f.Detail != nil {
		detail = ", detail " + excerpt([]byte(*f.Detail))
	}
	switch {
	case f.Permanent != nil && *f.Permanent:
		return tools.Result{}, fmt.Errorf("upstream %s: status %d%s: %w", name, resp.StatusCode, detail, tools.ErrPermanent)
	case f.ToolError != nil && modelSafe(*f.ToolError):
		return tools.Result{}, fmt.Errorf("upstream %s: status %d%s: %w", name, resp.StatusCode, detail, &tools.ModelError{Message: *f.ToolError})
	}
	return tools.Result{}, fmt.Errorf("upstream %s: status %d, undeclared error body %s", name, resp.StatusCode, excerpt(body))
}

// success passes a JSON string through and returns other JSON as its
// compact text.
func (t *Tool) success(status int, body []byte) (tools.Result, error) {
	v := jsontext.Value(bytes.Clone(body))
	if err := v.Compact(); err != nil {
		return tools.Result{}, fmt.Errorf("upstream %s: status %d, body is not JSON: %s", t.spec.Name, status, excerpt(body))
	}
	if v.Kind() == '"' {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return tools.Result{}, fmt.Errorf("upstream %s: status %d, invalid JSON string", t.spec.Name, status)
		}
		return tools.Result{Content: s, Bytes: len(s)}, nil
	}
	return tools.Result{Content: string(v), Bytes: len(v)}, nil
}

// modelSafe accepts a declared error text: non-blank, bounded, printable.
func modelSafe(s string) bool {
	if strings.TrimSpace(s) == "" || len(s) > MaxToolErrorBytes || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < ' ' && r != '\n' && r != '\t' || r == 0x7f {
			return false
		}
	}
	return true
}

// excerpt quotes at most 200 bytes of an upstream body for diagnostics.
func excerpt(b []byte) string {
	const max = 200
	if len(b) > max {
		return strconv.Quote(string(b[:max])) + "…"
	}
	return strconv.Quote(string(b))
}
