package fetch

import (
	"net/http"
	"net/textproto"
	"slices"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/internal/tools"
)

// Header argument bounds (the schema states the same).
const (
	maxHeaders         = 32
	maxHeaderNameBytes = 256
	maxHeaderValBytes  = 8192
)

// refusedHeaders are set by the transport or name a hop, not the target:
// letting the model set them would allow request smuggling or proxy games.
var refusedHeaders = map[string]bool{
	"Host":                true,
	"Content-Length":      true,
	"Transfer-Encoding":   true,
	"Connection":          true,
	"Keep-Alive":          true,
	"Te":                  true,
	"Trailer":             true,
	"Trailers":            true,
	"Upgrade":             true,
	"Proxy-Connection":    true,
	"Proxy-Authorization": true,
	"Proxy-Authenticate":  true,
}

// headersArg reads the headers argument: the header to send, and the same
// with canonical names as shown in Plan.Args.
func headersArg(args map[string]any) (http.Header, map[string]any, error) {
	h := http.Header{}
	shown := map[string]any{}
	raw, ok := args["headers"]
	if !ok {
		return h, shown, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return nil, nil, &tools.ArgError{Pointer: "/headers", Rule: "must be an object"}
	}
	if len(m) > maxHeaders {
		return nil, nil, &tools.ArgError{Pointer: "/headers", Rule: "must have at most " + strconv.Itoa(maxHeaders) + " entries"}
	}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names) // the first bad header reported is stable
	for _, name := range names {
		if len(name) > maxHeaderNameBytes || !validToken(name) {
			// The pointer would repeat an unbounded, odd name; keep it out.
			return nil, nil, &tools.ArgError{Pointer: "/headers", Rule: "names must be HTTP tokens of at most " + strconv.Itoa(maxHeaderNameBytes) + " bytes"}
		}
		ptr := "/headers/" + pointerToken(name)
		v, ok := m[name].(string)
		if !ok {
			return nil, nil, &tools.ArgError{Pointer: ptr, Rule: "must be a string"}
		}
		if len(v) > maxHeaderValBytes {
			return nil, nil, &tools.ArgError{Pointer: ptr, Rule: "must be at most " + strconv.Itoa(maxHeaderValBytes) + " bytes"}
		}
		if !validValue(v) {
			return nil, nil, &tools.ArgError{Pointer: ptr, Rule: "must not contain control characters"}
		}
		canon := textproto.CanonicalMIMEHeaderKey(name)
		if refusedHeaders[canon] || strings.HasPrefix(canon, "Proxy-") {
			return nil, nil, &tools.ArgError{Pointer: ptr, Rule: "is set by the gateway and may not be given"}
		}
		if _, dup := h[canon]; dup {
			return nil, nil, &tools.ArgError{Pointer: ptr, Rule: "is given twice (header names are case-insensitive)"}
		}
		h[canon] = []string{v}
		shown[canon] = v
	}
	return h, shown, nil
}

// validToken reports an RFC 9110 token.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		if !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}

// validValue refuses control characters but horizontal tab: CR and LF
// would split the request.
func validValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// pointerToken escapes a JSON Pointer reference token (RFC 6901).
func pointerToken(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
