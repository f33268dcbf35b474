package fetch

import (
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/net/idna"

	"github.com/toolgate/toolgate/internal/tools"
)

// maxURLBytes bounds the url argument (the schema bounds characters).
const maxURLBytes = 8192

// hostProfile maps a domain name to ASCII as the WHATWG URL standard does
// (UTS #46 for lookup, non-transitional) but, like browsers, allows "_" and
// hyphens in the third and fourth position ("r3---sn-x.example"), which the
// strict Lookup profile refuses although such hosts exist. validHostByte
// then limits the result to letters, digits, "-", "_" and ".".
var hostProfile = idna.New(
	idna.MapForLookup(),
	idna.Transitional(false),
	idna.BidiRule(),
	idna.CheckHyphens(false),
	idna.StrictDomainName(false),
	idna.VerifyDNSLength(true),
)

// target is a normalized URL.
type target struct {
	scheme string
	host   string     // lower-case ASCII name, or an IP in netip form (no brackets)
	ip     netip.Addr // valid when host is an IP literal
	port   int
	path   string // escaped, normalized, starts with "/"
	query  string // escaped, normalized; "" when none
}

// hostPort is host:port with IPv6 in brackets.
func (t target) hostPort() string { return net.JoinHostPort(t.host, strconv.Itoa(t.port)) }

// String is the canonical URL: scheme://host:port/path[?query].
func (t target) String() string {
	s := t.scheme + "://" + t.hostPort() + t.path
	if t.query != "" {
		s += "?" + t.query
	}
	return s
}

// hostHeader is the Host header value: the port only when it is not the
// scheme's default, as browsers and curl send it.
func (t target) hostHeader() string {
	if t.port == defaultPort(t.scheme) {
		if t.ip.Is6() {
			return "[" + t.host + "]"
		}
		return t.host
	}
	return t.hostPort()
}

// sameOrigin reports whether u has the same scheme, host and port.
func (t target) sameOrigin(u target) bool {
	return t.scheme == u.scheme && t.host == u.host && t.port == u.port
}

func defaultPort(scheme string) int {
	if scheme == "https" {
		return 443
	}
	return 80
}

func urlErr(rule string) error { return &tools.ArgError{Pointer: "/url", Rule: rule} }

// parseTarget normalizes a URL string. Its errors are *tools.ArgError whose
// rules never repeat the URL.
func parseTarget(raw string) (target, error) {
	if len(raw) > maxURLBytes {
		return target{}, urlErr("must be at most " + strconv.Itoa(maxURLBytes) + " bytes")
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's message repeats the URL; keep only the verdict.
		return target{}, urlErr("must be an absolute http or https URL")
	}
	return targetOf(u)
}

// targetOf normalizes a parsed URL.
func targetOf(u *url.URL) (target, error) {
	var t target
	t.scheme = strings.ToLower(u.Scheme)
	if t.scheme != "http" && t.scheme != "https" {
		if t.scheme == "" {
			return target{}, urlErr("must be an absolute http or https URL")
		}
		return target{}, urlErr("scheme must be http or https")
	}
	if u.Opaque != "" {
		return target{}, urlErr("must be an absolute http or https URL")
	}
	if u.User != nil {
		return target{}, urlErr("must not contain credentials")
	}
	host, ip, err := normalizeHost(u)
	if err != nil {
		return target{}, err
	}
	t.host, t.ip = host, ip
	t.port = defaultPort(t.scheme)
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return target{}, urlErr("port must be between 1 and 65535")
		}
		t.port = n
	}
	t.path = removeDotSegments(normalizeEscapes(u.EscapedPath(), pathByte))
	if t.path == "" || t.path[0] != '/' {
		t.path = "/" + t.path
	}
	t.query = normalizeEscapes(u.RawQuery, queryByte)
	return t, nil
}

// normalizeHost returns the canonical host of u and, for an IP literal,
// its address.
func normalizeHost(u *url.URL) (string, netip.Addr, error) {
	h := u.Hostname()
	if strings.HasPrefix(u.Host, "[") {
		a, err := netip.ParseAddr(h)
		if err != nil || !a.Is6() {
			return "", netip.Addr{}, urlErr("host is not a valid IP address")
		}
		if a.Zone() != "" {
			return "", netip.Addr{}, urlErr("must not contain an IPv6 zone")
		}
		a = a.Unmap()
		return a.String(), a, nil
	}
	h = strings.TrimSuffix(h, ".")
	if h == "" {
		return "", netip.Addr{}, urlErr("host is required")
	}
	ascii, err := hostProfile.ToASCII(h)
	if err != nil {
		return "", netip.Addr{}, urlErr("host is not a valid domain name")
	}
	// Mapping may turn a final full-width dot into "."; drop it once more.
	ascii = strings.TrimSuffix(ascii, ".")
	if ascii == "" {
		return "", netip.Addr{}, urlErr("host is required")
	}
	if endsInNumber(ascii) {
		a, ok := parseLegacyIPv4(ascii)
		if !ok {
			return "", netip.Addr{}, urlErr("host is not a valid IPv4 address")
		}
		return a.String(), a, nil
	}
	for i := 0; i < len(ascii); i++ {
		if !validHostByte(ascii[i]) {
			return "", netip.Addr{}, urlErr("host is not a valid domain name")
		}
	}
	return ascii, netip.Addr{}, nil
}

func validHostByte(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.'
}
