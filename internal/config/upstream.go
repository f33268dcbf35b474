package config

import (
	"time"

	upstreamv1 "github.com/toolgate/toolgate/api/upstream/v1"
)

// Defaults of upstream tool declarations and assertions.
const (
	DefaultUpstreamMethod        = "POST"
	DefaultUpstreamTimeout       = 10 * time.Second
	DefaultUpstreamConcurrency   = 16
	DefaultUpstreamResponseBytes = 1 << 20
	DefaultAssertionIssuer       = upstreamv1.DefaultIssuer
	DefaultAssertionTTL          = time.Minute
	// MaxAssertionTTL bounds how long a leaked assertion stays usable.
	MaxAssertionTTL = 10 * time.Minute
)

// Upstream declares one application tool: the published specification,
// how its typed resources are built from the arguments, and the HTTP
// endpoint that runs it.
type Upstream struct {
	Name        string      `yaml:"name"`
	Description string      `yaml:"description"`
	InputSchema JSON        `yaml:"input_schema"` // a JSON Schema 2020-12 object schema, written as YAML or JSON
	Annotations Annotations `yaml:"annotations"`
	Action      string      `yaml:"action"` // e.g. "maintenance.read"; default "upstream.<name>"
	// Resources are built from the arguments: "type" names the resource
	// type, every other key is a JSON pointer into the arguments whose
	// value becomes that member ({type: service, id: /service_id}).
	Resources []map[string]string `yaml:"resources"`
	Endpoint  Endpoint            `yaml:"endpoint"`
	Limits    UpstreamLimits      `yaml:"limits"`
}

// Annotations are the hints published with a tool.
type Annotations struct {
	ReadOnly    bool `yaml:"read_only"`
	Destructive bool `yaml:"destructive"`
	Idempotent  bool `yaml:"idempotent"`
	OpenWorld   bool `yaml:"open_world"`
}

// Endpoint is where an upstream tool runs. The URL is fixed here: no
// argument can choose the host.
type Endpoint struct {
	URL           string        `yaml:"url"`            // http or https
	Method        string        `yaml:"method"`         // POST, PUT or PATCH; default POST
	Timeout       time.Duration `yaml:"timeout"`        // whole call, default 10s
	MaxConcurrent int           `yaml:"max_concurrent"` // calls in flight to this upstream, default 16
}

// UpstreamLimits bound what an upstream may return.
type UpstreamLimits struct {
	// MaxResponseBytes: a longer response body fails the call ("the tool
	// failed"). Default 1 MiB.
	MaxResponseBytes int64 `yaml:"max_response_bytes"`
	// MaxOutputBytes caps the model-facing content (cut with a notice);
	// 0 means limits.max_output_bytes.
	MaxOutputBytes int `yaml:"max_output_bytes"`
}

// Assertion configures the short-lived JWTs (EdDSA) the gateway signs for
// every upstream call. The signing key and the published keys are served at
// GET /.well-known/jwks.json. To rotate: move the signing key's file to
// published_key_files, point signing_key_file at a new file (created on
// start), and drop the old file once assertions it signed have expired
// (ttl).
type Assertion struct {
	Issuer            string        `yaml:"issuer"`              // "iss", default "toolgate"
	TTL               time.Duration `yaml:"ttl"`                 // default 1m, at most 10m
	SigningKeyFile    string        `yaml:"signing_key_file"`    // Ed25519 PKCS#8 PEM; created on first start if missing
	PublishedKeyFiles []string      `yaml:"published_key_files"` // previous keys: verification only
}

// JSON is a JSON value written in the config as YAML (or as JSON, which is
// YAML). It holds the value's JSON text.
type JSON []byte
