package fetch

import (
	"net/netip"
	"strings"
)

// The legacy IPv4 forms below are what inet_aton, curl and the WHATWG URL
// parser accept. A host in one of them must be recognised as the address it
// is, or "http://2130706433/" would reach DNS (or the dialer) as a name and
// policy would never see "loopback".

// endsInNumber reports whether the last label of host is a number, in
// which case the host must be an IPv4 address (WHATWG "ends in a number").
func endsInNumber(host string) bool {
	last := host[strings.LastIndexByte(host, '.')+1:]
	if last == "" {
		return false
	}
	if strings.Trim(last, "0123456789") == "" {
		return true // "08" is no valid number, but still no name either
	}
	_, ok := parseIPv4Number(last)
	return ok
}

// parseIPv4Number parses one part: "0x"/"0X" hex, leading-"0" octal or
// decimal. Values past 2^32 saturate so that range checks refuse them.
func parseIPv4Number(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := uint64(10)
	switch {
	case len(s) >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		s, base = s[2:], 16
	case len(s) >= 2 && s[0] == '0':
		s, base = s[1:], 8
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		var d uint64
		c := s[i]
		switch {
		case '0' <= c && c <= '9':
			d = uint64(c - '0')
		case base == 16 && 'a' <= c && c <= 'f':
			d = uint64(c-'a') + 10
		case base == 16 && 'A' <= c && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		if n <= 1<<32 {
			n = n*base + d
		}
	}
	return n, true
}

// parseLegacyIPv4 parses one to four dot-separated numbers; the last one
// fills the remaining bytes ("127.1" is 127.0.0.1).
func parseLegacyIPv4(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	nums := make([]uint64, len(parts))
	for i, p := range parts {
		n, ok := parseIPv4Number(p)
		if !ok {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	var v uint64
	for _, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, false
		}
		v = v<<8 | n
	}
	rest := 8 * uint(5-len(nums))
	last := nums[len(nums)-1]
	if last >= 1<<rest {
		return netip.Addr{}, false
	}
	v = v<<rest | last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}
