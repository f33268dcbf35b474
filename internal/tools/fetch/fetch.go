package fetch

import (
	"context"
	"crypto/x509"
	"net"
	"net/netip"
	"time"

	"github.com/toolgate/toolgate/internal/tools"
)

// Defaults of Options and the tool's own limits.
const (
	DefaultLookupTimeout         = 5 * time.Second
	DefaultDialTimeout           = 10 * time.Second
	DefaultTLSHandshakeTimeout   = 10 * time.Second
	DefaultResponseHeaderTimeout = 30 * time.Second
	DefaultMaxBodyBytes          = 64 << 10

	// headRoom is what the status line, 16 header lines and notices may
	// take on top of the body in the tool's own output limit.
	headRoom     = 8 << 10
	callTimeout  = 30 * time.Second
	maxRedirects = 5
	maxAddresses = 16
)

// Resolver looks up the addresses of a host name. *net.Resolver implements
// it; tests pass a stub so that no real DNS is needed.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// DialFunc opens a connection to addr, always an "ip:port" that was pinned at
// prepare.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Options configure the fetch tool. The zero value is the production setup.
type Options struct {
	Resolver Resolver // default net.DefaultResolver
	// DialContext connects to one pinned address; default a net.Dialer.
	// Each attempt is bounded by DialTimeout.
	DialContext DialFunc
	// RootCAs verifies server certificates; nil means the system pool.
	RootCAs *x509.CertPool

	LookupTimeout         time.Duration // default 5 s
	DialTimeout           time.Duration // per address; default 10 s
	TLSHandshakeTimeout   time.Duration // default 10 s
	ResponseHeaderTimeout time.Duration // default 30 s
	MaxBodyBytes          int           // body cap; default 64 KiB
}

func (o Options) withDefaults() Options {
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.DialContext == nil {
		o.DialContext = (&net.Dialer{}).DialContext
	}
	if o.LookupTimeout <= 0 {
		o.LookupTimeout = DefaultLookupTimeout
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.TLSHandshakeTimeout <= 0 {
		o.TLSHandshakeTimeout = DefaultTLSHandshakeTimeout
	}
	if o.ResponseHeaderTimeout <= 0 {
		o.ResponseHeaderTimeout = DefaultResponseHeaderTimeout
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	return o
}

const fetchSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "url": {
      "type": "string", "minLength": 1, "maxLength": 8192,
      "description": "Absolute http or https URL to fetch. Must not contain credentials (user@host); the #fragment is ignored."
    },
    "method": {
      "type": "string", "enum": ["GET", "POST"], "default": "GET",
      "description": "HTTP method, GET or POST. Default GET."
    },
    "headers": {
      "type": "object", "maxProperties": 32, "default": {},
      "propertyNames": {"minLength": 1, "maxLength": 256, "pattern": "^[!#$%&'*+.^_\u0060|~0-9A-Za-z-]+$"},
      "additionalProperties": {"type": "string", "maxLength": 8192},
      "description": "Request headers, name to value (at most 32). Host, Content-Length, Transfer-Encoding, Connection, Proxy-* and other hop-by-hop headers are set by the gateway and refused."
    },
    "body": {
      "type": "string", "maxLength": 1048576,
      "description": "Request body (at most 1 MiB), only with method POST. Set a Content-Type header to describe it."
    }
  },
  "required": ["url"],
  "additionalProperties": false
}`

// Fetch is the fetch tool.
type Fetch struct {
	spec tools.Spec
	opts Options
}

// Compile-time check that Fetch is a tool.
var _ tools.Tool = (*Fetch)(nil)

// New returns the fetch tool.
func New(opts Options) *Fetch {
	opts = opts.withDefaults()
	return &Fetch{
		opts: opts,
		spec: tools.Spec{
			Name: "fetch",
			Description: "Fetch an http or https URL with GET (default) or POST. Returns the status line, " +
				"at most 16 response header lines and the body as text, capped at 64 KiB (a binary body is " +
				"summarized). Redirects are followed (at most 5) only within the same scheme, host and port; " +
				"a redirect elsewhere is returned with its location so that you can fetch it with a new call.",
			InputSchema: fetchSchema,
			Kind:        tools.KindBuiltin,
			Action:      "net.fetch",
			Effects:     []string{"net.fetch"},
			Annotations: tools.Annotations{ReadOnly: true, OpenWorld: true},
			Limits:      tools.Limits{Timeout: callTimeout, MaxOutputBytes: opts.MaxBodyBytes + headRoom},
		},
	}
}

// Spec returns the published description.
func (f *Fetch) Spec() *tools.Spec { return &f.spec }
