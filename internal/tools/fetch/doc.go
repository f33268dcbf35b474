// Package fetch implements the built-in fetch tool: one HTTP GET or POST to
// an http or https URL, with the target normalized, resolved and pinned at
// prepare so that policy decides on exactly what will be dialed.
//
// # Canonical URL
//
// Prepare parses the url argument with net/url and rebuilds it as
//
//	scheme "://" host ":" port path [ "?" query ]
//
// where:
//
//   - scheme is "http" or "https", lower-case; anything else is refused.
//   - Userinfo is refused, even an empty one ("http://@host/").
//   - host is lower-case ASCII: a domain name goes through IDNA (UTS #46
//     mapping for lookup, non-transitional, as browsers do: hyphens in the
//     third and fourth position and "_" are allowed, every other ASCII byte
//     but letters, digits, "-" and "." is refused), one trailing dot is
//     removed. A name whose last label is a number is an IPv4 address in one
//     of the legacy forms inet_aton and browsers accept (decimal
//     "2130706433", hex "0x7f000001", octal "0177.0.0.1", short "127.1") and
//     becomes its dotted quad, or is refused; it never reaches DNS. IPv6
//     literals are written in netip's canonical form inside brackets;
//     IPv4-mapped IPv6 becomes plain IPv4; zones are refused.
//   - port is always written, 80 or 443 when the URL has none.
//   - path starts with "/"; percent-escapes are upper-cased, escapes of
//     unreserved characters (A-Z a-z 0-9 - . _ ~) are decoded, any other byte
//     a path may not carry is escaped, and "." and ".." segments are removed
//     (RFC 3986 §6.2.2 and §5.2.4, as browsers and curl do), so that
//     "/public/%2e%2e/admin" is shown to policy as the "/admin" it is.
//   - query is kept with the same escape normalization; an empty query and
//     the fragment are dropped.
//
// Example: "HTTPS://Example.COM./a/./b?x#f" is "https://example.com:443/a/b?x".
//
// # Address classes
//
// The host is resolved once, at prepare (an IP literal is its own address).
// Each address is shown to policy with a class: "metadata" (169.254.169.254,
// 169.254.170.2, 100.100.100.200, fd00:ec2::254), "loopback" (127.0.0.0/8,
// ::1), "link_local" (169.254.0.0/16, fe80::/10), "private" (10/8,
// 172.16/12, 192.168/16, 100.64/10, fc00::/7, fec0::/10, 64:ff9b:1::/48),
// "unspecified" (0.0.0.0/8, ::), "multicast" (224/4, ff00::/8), "reserved"
// (240/4 and broadcast, 192.0.0/24, documentation and benchmarking ranges,
// 192.88.99/24, and every IPv6 address outside 2000::/3 not named above, plus
// 2001::/23 and 2001:db8::/32, 3fff::/20, 5f00::/16) or "public". NAT64
// (64:ff9b::/96) and 6to4 (2002::/16) addresses take the class of the IPv4
// address they embed. address_class is the most sensitive class among the
// addresses: metadata > loopback > link_local > private > unspecified >
// multicast > reserved > public.
//
// # Pinning and redirects
//
// Run dials only the addresses resolved at prepare, in order, and never
// consults DNS again, so a DNS answer that changes between prepare and invoke
// cannot move the connection. TLS verifies the certificate against the
// canonical host. No proxy is used.
//
// A redirect is followed, at most 5 times, only when its location has the
// same scheme, host and port as the approved URL: it is then dialed through
// the same pinned addresses. Any other redirect is not followed: the 3xx
// response is returned with a notice naming its location, so that the model
// can make a new call that is prepared, decided and audited on its own.
//
// # Result and errors
//
// The content is "HTTP <status> <reason>", at most 16 response header lines
// (sorted by name, each cut to 256 bytes), a blank line and the body as
// UTF-8 text, capped at 64 KiB (less when the call's output limit is
// smaller) with a truncation notice; a body that is not UTF-8 text is
// replaced by "[binary body: …]". A non-2xx status is a successful result.
// A network failure is an error whose text names only the method and the
// host ("fetch GET example.com: connection refused"), never the path, query,
// headers or body.
package fetch
