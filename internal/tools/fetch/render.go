package fetch

import (
	"bytes"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/toolgate/toolgate/internal/tools"
)

// Rendering bounds.
const (
	maxHeaderLines    = 16
	maxHeaderLineLen  = 256
	maxLocationLen    = 2048
	maxContentTypeLen = 128
	noticeReserve     = 160 // room kept under the cap for the closing notice
)

// render turns the response into the model-facing result within limit
// bytes.
func (f *Fetch) render(a artifact, resp *http.Response, stop redirectStop, limit int) (tools.Result, error) {
	var b strings.Builder
	b.WriteString("HTTP ")
	b.WriteString(strconv.Itoa(resp.StatusCode))
	// The standard reason, not the server's: a stable, short line.
	if txt := http.StatusText(resp.StatusCode); txt != "" {
		b.WriteByte(' ')
		b.WriteString(txt)
	}
	b.WriteByte('\n')
	writeHeaderLines(&b, resp.Header)
	writeRedirectNotice(&b, resp, stop)
	b.WriteByte('\n')

	budget := max(0, min(f.opts.MaxBodyBytes, limit-b.Len()-noticeReserve))
	raw, err := io.ReadAll(io.LimitReader(resp.Body, int64(budget)+1))
	if err != nil {
		return tools.Result{}, newNetError(a, err)
	}
	truncated := len(raw) > budget
	if truncated {
		raw = raw[:budget]
	}
	n := len(raw)
	text := raw
	if truncated {
		text = trimPartialRune(text)
	}
	switch {
	case n == 0 && !truncated:
		b.WriteString("[empty body]")
	case isBinary(text):
		b.WriteString("[binary body: ")
		if truncated {
			b.WriteString("more than ")
		}
		b.WriteString(strconv.Itoa(n))
		b.WriteString(" bytes, content-type ")
		b.WriteString(contentType(resp.Header))
		b.WriteString("]")
	default:
		b.Write(text)
		if truncated {
			b.WriteString("\n[truncated: showing the first ")
			b.WriteString(strconv.Itoa(len(text)))
			b.WriteString(" bytes of the body")
			if resp.ContentLength > 0 {
				b.WriteString(" of ")
				b.WriteString(strconv.FormatInt(resp.ContentLength, 10))
			}
			b.WriteString("]")
		}
	}
	return tools.Result{
		Content:   capString(b.String(), limit),
		Data:      map[string]any{"status": resp.StatusCode, "bytes": n, "truncated": truncated},
		Bytes:     n,
		Truncated: truncated,
	}, nil
}

// writeHeaderLines writes at most maxHeaderLines "Name: value" lines,
// sorted by name with values in received order, each cut to
// maxHeaderLineLen bytes.
func writeHeaderLines(b *strings.Builder, h http.Header) {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names)
	written, total := 0, 0
	for _, name := range names {
		for _, v := range h[name] {
			total++
			if written == maxHeaderLines {
				continue
			}
			b.WriteString(cleanLine(name+": "+v, maxHeaderLineLen))
			b.WriteByte('\n')
			written++
		}
	}
	if total > written {
		b.WriteString("[" + strconv.Itoa(total-written) + " more header lines not shown]\n")
	}
}

// writeRedirectNotice explains a redirect that was returned, not followed,
// and names its location for a new call.
func writeRedirectNotice(b *strings.Builder, resp *http.Response, stop redirectStop) {
	switch stop {
	case stopOtherOrigin:
		b.WriteString("[redirect not followed: the location is another origin (scheme, host or port); fetch it with a new call if needed]\n")
	case stopTooMany:
		b.WriteString("[redirect not followed: more than " + strconv.Itoa(maxRedirects) + " redirects]\n")
	default:
		return
	}
	loc := resp.Header.Get("Location")
	if u, err := resp.Location(); err == nil {
		loc = u.String()
	}
	b.WriteString(cleanLine("location: "+loc, maxLocationLen))
	b.WriteByte('\n')
}

// cleanLine makes s one line of valid UTF-8 of at most n bytes.
func cleanLine(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if r < ' ' && r != '\t' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) <= n {
		return s
	}
	return capString(s, n-len("…")) + "…"
}

// contentType is the response's media type for the binary notice.
func contentType(h http.Header) string {
	ct := h.Get("Content-Type")
	if ct == "" {
		return "unknown"
	}
	if mt, _, err := mime.ParseMediaType(ct); err == nil {
		ct = mt
	}
	return cleanLine(ct, maxContentTypeLen)
}

// isBinary reports a body that is not UTF-8 text.
func isBinary(b []byte) bool { return bytes.IndexByte(b, 0) >= 0 || !utf8.Valid(b) }

// trimPartialRune drops an incomplete UTF-8 sequence the cap cut at the
// end, so that a text body cut mid-character is not taken for binary.
func trimPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// capString cuts s to at most max bytes without splitting a UTF-8 sequence.
func capString(s string, max int) string {
	if len(s) <= max {
		return s
	}
	if max <= 0 {
		return ""
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
