package fetch

import (
	"strings"
	"testing"
)

func TestURLNormalization(t *testing.T) {
	tests := []struct {
		in   string
		want string // canonical URL; "" when an ArgError is expected
		rule string // substring of the ArgError rule
	}{
		// Case, trailing dot, fragment, default ports.
		{"HTTPS://EXAMPLE.COM", "https://example.com:443/", ""},
		{"http://Example.com./a#frag", "http://example.com:80/a", ""},
		{"http://example.com:8080", "http://example.com:8080/", ""},
		{"http://example.com:/x", "http://example.com:80/x", ""},
		{"http://example.com:080/", "http://example.com:80/", ""},
		{"https://example.com:80/", "https://example.com:80/", ""},
		{"http://example.com/?", "http://example.com:80/", ""},
		// Credentials, even empty ones.
		{"http://user@host/", "", "must not contain credentials"},
		{"http://:pw@host/", "", "must not contain credentials"},
		{"http://@host/", "", "must not contain credentials"},
		{"http://user:pw@127.0.0.1/", "", "must not contain credentials"},
		// IP literals and legacy IPv4 forms.
		{"http://[::ffff:127.0.0.1]:8080/", "http://127.0.0.1:8080/", ""},
		{"HTTP://[::FFFF:7F00:1]/", "http://127.0.0.1:80/", ""},
		{"http://2130706433/", "http://127.0.0.1:80/", ""},
		{"http://0x7f000001/", "http://127.0.0.1:80/", ""},
		{"http://0X7F000001/", "http://127.0.0.1:80/", ""},
		{"http://0177.0.0.1/", "http://127.0.0.1:80/", ""},
		{"http://127.1/", "http://127.0.0.1:80/", ""},
		{"http://0x7f.1/", "http://127.0.0.1:80/", ""},
		{"http://127.0.0.1./", "http://127.0.0.1:80/", ""},
		{"http://0/", "http://0.0.0.0:80/", ""},
		{"http://169.254.169.254/latest", "http://169.254.169.254:80/latest", ""},
		{"http://[::1]/", "http://[::1]:80/", ""},
		{"http://[0:0:0:0:0:0:0:1]:8080/x", "http://[::1]:8080/x", ""},
		{"http://[FD00:EC2::254]/", "http://[fd00:ec2::254]:80/", ""},
		{"http://１２７.０.０.１/", "http://127.0.0.1:80/", ""},
		{"http://256.0.0.1/", "", "not a valid IPv4 address"},
		{"http://1.2.3.4.5/", "", "not a valid IPv4 address"},
		{"http://4294967296/", "", "not a valid IPv4 address"},
		{"http://1.2.3.08/", "", "not a valid IPv4 address"},
		{"http://example.123/", "", "not a valid IPv4 address"},
		{"http://[fe80::1%25eth0]/", "", "IPv6 zone"},
		// IDNA.
		{"http://bücher.example/", "http://xn--bcher-kva.example:80/", ""},
		{"http://BÜCHER.Example/", "http://xn--bcher-kva.example:80/", ""},
		{"http://b%C3%BCcher.example/", "http://xn--bcher-kva.example:80/", ""},
		{"http://ｅｘａｍｐｌｅ。com/", "http://example.com:80/", ""},
		{"http://r3---sn-abc.example/", "http://r3---sn-abc.example:80/", ""},
		{"http://a_b.example/", "http://a_b.example:80/", ""},
		{"http://a..b/", "", "not a valid domain name"},
		{"http://a*b.example/", "", "not a valid domain name"},
		// Schemes and shapes.
		{"ftp://example.com/", "", "scheme must be http or https"},
		{"file:///etc/passwd", "", "scheme must be http or https"},
		{"javascript:alert(1)", "", "scheme must be http or https"},
		{"http:foo", "", "absolute http or https URL"},
		{"/relative/path", "", "absolute http or https URL"},
		{"http://example.com\\@evil.example/", "", "absolute http or https URL"},
		{"http://exa mple.com/", "", "absolute http or https URL"},
		// Ports and hosts.
		{"http://example.com:0/", "", "port must be between 1 and 65535"},
		{"http://example.com:99999/", "", "port must be between 1 and 65535"},
		{"http:///path", "", "host is required"},
		{"http://./", "", "host is required"},
		// Paths and queries.
		{"http://example.com/a/./b/../c?x=%7e&y=%2f#f", "http://example.com:80/a/c?x=~&y=%2F", ""},
		{"http://example.com/public/%2e%2E/admin", "http://example.com:80/admin", ""},
		{"http://example.com/%61dmin", "http://example.com:80/admin", ""},
		{"http://example.com/a%2fb", "http://example.com:80/a%2Fb", ""},
		{"http://example.com/a b?q=x y", "http://example.com:80/a%20b?q=x%20y", ""},
		{"http://example.com/../../x", "http://example.com:80/x", ""},
		{"http://example.com/a/..", "http://example.com:80/", ""},
		{"http://example.com/a//b/", "http://example.com:80/a//b/", ""},
		{"http://example.com/ä?ü=1", "http://example.com:80/%C3%A4?%C3%BC=1", ""},
		{"http://example.com/?a=%zz&b=%", "http://example.com:80/?a=%25zz&b=%25", ""},
		{"http://example.com/100%", "", "absolute http or https URL"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseTarget(tt.in)
			if tt.want != "" {
				if err != nil {
					t.Fatalf("parseTarget(%q): %v", tt.in, err)
				}
				if got.String() != tt.want {
					t.Fatalf("parseTarget(%q) = %q, want %q", tt.in, got.String(), tt.want)
				}
				// The canonical form is a fixed point.
				again, err := parseTarget(got.String())
				if err != nil || again.String() != got.String() {
					t.Fatalf("canonical %q is not stable: %q, %v", got.String(), again.String(), err)
				}
				return
			}
			ae := wantArgError(t, err, "/url")
			if !strings.Contains(ae.Rule, tt.rule) {
				t.Fatalf("rule %q does not contain %q", ae.Rule, tt.rule)
			}
		})
	}
}

func TestArgErrorRulesNeverRepeatTheURL(t *testing.T) {
	for _, in := range []string{
		"http://secret-user:secret-pw@host/secret-path",
		"gopher://secret.example/secret-path?secret=1",
		"http://secret.example:99999/secret-path",
		"http://secret%zz.example/secret-path",
		"http://secret.999/secret-path",
	} {
		_, err := parseTarget(in)
		ae := wantArgError(t, err, "/url")
		if strings.Contains(ae.Error(), "secret") {
			t.Errorf("error for %q repeats the URL: %q", in, ae.Error())
		}
	}
}

func TestLegacyIPv4Parsing(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" for not an address
	}{
		{"127.0.0.1", "127.0.0.1"},
		{"2130706433", "127.0.0.1"},
		{"0x7f000001", "127.0.0.1"},
		{"017700000001", "127.0.0.1"},
		{"0177.0.0.1", "127.0.0.1"},
		{"127.1", "127.0.0.1"},
		{"127.0.1", "127.0.0.1"},
		{"10.0x10.1", "10.16.0.1"},
		{"0x", "0.0.0.0"},
		{"0", "0.0.0.0"},
		{"255.255.255.255", "255.255.255.255"},
		{"4294967295", "255.255.255.255"},
		{"4294967296", ""},
		{"1.16777216", ""},
		{"1.2.65536", ""},
		{"256.1.1.1", ""},
		{"08", ""},
		{"0xg", ""},
		{"1.2.3.4.5", ""},
		{"1..2", ""},
		{"99999999999999999999999", ""},
	}
	for _, tt := range tests {
		a, ok := parseLegacyIPv4(tt.in)
		got := ""
		if ok {
			got = a.String()
		}
		if got != tt.want {
			t.Errorf("parseLegacyIPv4(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestHostEndsInNumberOnlyForNumericLastLabels(t *testing.T) {
	tests := map[string]bool{
		"example.com": false, "1.2.3.4": true, "example.123": true, "123.example": false,
		"0x10": true, "example.0x": true, "example.0xg": false, "08": true, "1e5": false,
	}
	for host, want := range tests {
		if got := endsInNumber(host); got != want {
			t.Errorf("endsInNumber(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestHostHeaderOmitsOnlyTheDefaultPort(t *testing.T) {
	tests := map[string]string{
		"http://example.com/":        "example.com",
		"https://example.com/":       "example.com",
		"http://example.com:8080/":   "example.com:8080",
		"https://example.com:80/":    "example.com:80",
		"http://[::1]/":              "[::1]",
		"http://[::1]:8080/":         "[::1]:8080",
		"http://bücher.example:81/x": "xn--bcher-kva.example:81",
	}
	for in, want := range tests {
		tg, err := parseTarget(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := tg.hostHeader(); got != want {
			t.Errorf("hostHeader(%q) = %q, want %q", in, got, want)
		}
	}
}
