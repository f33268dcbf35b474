package fetch

import (
	"net/netip"
	"testing"
)

// These addresses are only classified, never dialed.
func TestAddressClasses(t *testing.T) {
	tests := []struct{ ip, want string }{
		{"127.0.0.1", ClassLoopback},
		{"127.255.0.9", ClassLoopback},
		{"::1", ClassLoopback},
		{"::ffff:127.0.0.1", ClassLoopback},
		{"10.1.2.3", ClassPrivate},
		{"192.168.1.1", ClassPrivate},
		{"172.16.0.1", ClassPrivate},
		{"172.31.255.255", ClassPrivate},
		{"100.64.0.1", ClassPrivate},
		{"fc00::1", ClassPrivate},
		{"fd12:3456::1", ClassPrivate},
		{"169.254.169.254", ClassMetadata},
		{"169.254.170.2", ClassMetadata},
		{"100.100.100.200", ClassMetadata},
		{"fd00:ec2::254", ClassMetadata},
		{"::ffff:169.254.169.254", ClassMetadata},
		{"169.254.1.1", ClassLinkLocal},
		{"fe80::1", ClassLinkLocal},
		{"0.0.0.0", ClassUnspecified},
		{"0.1.2.3", ClassUnspecified},
		{"::", ClassUnspecified},
		{"224.0.0.1", ClassMulticast},
		{"239.255.255.250", ClassMulticast},
		{"ff02::1", ClassMulticast},
		{"255.255.255.255", ClassReserved},
		{"240.0.0.1", ClassReserved},
		{"192.0.2.1", ClassReserved},
		{"198.18.0.1", ClassReserved},
		{"2001:db8::1", ClassReserved},
		{"100::1", ClassReserved},
		{"64:ff9b::7f00:1", ClassLoopback},    // NAT64 of 127.0.0.1
		{"64:ff9b::a9fe:a9fe", ClassMetadata}, // NAT64 of 169.254.169.254
		{"64:ff9b::808:808", ClassPublic},     // NAT64 of 8.8.8.8
		{"2002:7f00:1::", ClassLoopback},      // 6to4 of 127.0.0.1
		{"2002:c0a8:101::1", ClassPrivate},    // 6to4 of 192.168.1.1
		{"64:ff9b:1::a00:1", ClassPrivate},    // local-use NAT64
		{"8.8.8.8", ClassPublic},              // classification only
		{"93.184.216.34", ClassPublic},        // classification only
		{"2606:4700:4700::1111", ClassPublic}, // classification only
		{"172.32.0.1", ClassPublic},           // just outside 172.16/12
		{"100.128.0.1", ClassPublic},          // just outside 100.64/10
		{"169.254.169.253", ClassLinkLocal},   // next to metadata
		{"fd00:ec2::253", ClassPrivate},       // next to metadata
		{"fe80::1%eth0", ClassLinkLocal},      // zones are ignored
		{"::7f00:1", ClassReserved},           // deprecated IPv4-compatible
	}
	for _, tt := range tests {
		if got := classify(netip.MustParseAddr(tt.ip)); got != tt.want {
			t.Errorf("classify(%s) = %s, want %s", tt.ip, got, tt.want)
		}
	}
}

func TestAddressClassIsTheMostSensitive(t *testing.T) {
	order := []string{ClassMetadata, ClassLoopback, ClassLinkLocal, ClassPrivate,
		ClassUnspecified, ClassMulticast, ClassReserved, ClassPublic}
	for i, hi := range order {
		for _, lo := range order[i:] {
			if got := worstClass([]string{lo, hi, lo}); got != hi {
				t.Errorf("worstClass(%s, %s) = %s, want %s", lo, hi, got, hi)
			}
		}
	}
	if got := worstClass(nil); got != ClassPublic {
		t.Errorf("worstClass() = %s", got)
	}
}
