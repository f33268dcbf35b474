package fetch

import "net/netip"

// Address classes shown to policy.
const (
	ClassMetadata    = "metadata"
	ClassLoopback    = "loopback"
	ClassLinkLocal   = "link_local"
	ClassPrivate     = "private"
	ClassUnspecified = "unspecified"
	ClassMulticast   = "multicast"
	ClassReserved    = "reserved"
	ClassPublic      = "public"
)

// classRank orders classes by sensitivity; address_class is the highest.
var classRank = map[string]int{
	ClassMetadata:    7,
	ClassLoopback:    6,
	ClassLinkLocal:   5,
	ClassPrivate:     4,
	ClassUnspecified: 3,
	ClassMulticast:   2,
	ClassReserved:    1,
	ClassPublic:      0,
}

// worstClass returns the most sensitive of classes (public for none).
func worstClass(classes []string) string {
	worst := ClassPublic
	for _, c := range classes {
		if classRank[c] > classRank[worst] {
			worst = c
		}
	}
	return worst
}

// metadataAddrs are cloud instance-metadata endpoints, which sit inside
// link-local or private ranges but deserve their own class.
var metadataAddrs = map[netip.Addr]bool{
	netip.MustParseAddr("169.254.169.254"): true, // AWS, GCP, Azure, OpenStack …
	netip.MustParseAddr("169.254.170.2"):   true, // AWS ECS task metadata
	netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
	netip.MustParseAddr("fd00:ec2::254"):   true, // AWS IMDS over IPv6
}

func prefixes(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(ss))
	for i, s := range ss {
		out[i] = netip.MustParsePrefix(s)
	}
	return out
}

var (
	privateExtra = prefixes(
		"100.64.0.0/10",  // carrier-grade NAT shared space: never public
		"fec0::/10",      // deprecated site-local
		"64:ff9b:1::/48", // local-use NAT64: translated inside the site
	)
	unspecifiedNet = prefixes("0.0.0.0/8") // "this network"; Linux dials 0.0.0.0 as loopback
	reservedNets   = prefixes(
		"240.0.0.0/4", // future use and limited broadcast
		"192.0.0.0/24", "192.0.2.0/24", "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24",
		"192.88.99.0/24", // deprecated 6to4 relay anycast
		"2001::/23", "2001:db8::/32", "3fff::/20", "5f00::/16",
	)
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
)

// classify returns the class of one address.
func classify(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	switch {
	case !a.IsValid():
		return ClassReserved
	case metadataAddrs[a]:
		return ClassMetadata
	case nat64.Contains(a):
		// The translator connects to the embedded IPv4 address.
		b := a.As16()
		return classify(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	case sixToFour.Contains(a):
		b := a.As16()
		return classify(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
	case a.IsLoopback():
		return ClassLoopback
	case a.IsLinkLocalUnicast():
		return ClassLinkLocal
	case a.IsPrivate() || inAny(privateExtra, a):
		return ClassPrivate
	case a.IsUnspecified() || inAny(unspecifiedNet, a):
		return ClassUnspecified
	case a.IsMulticast():
		return ClassMulticast
	case inAny(reservedNets, a):
		return ClassReserved
	case a.Is6() && !globalUnicast6.Contains(a):
		return ClassReserved
	}
	return ClassPublic
}

func inAny(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
