// Package config loads and validates gateway.yaml. It is the only package
// that reads configuration files or the environment for settings; every
// other package receives typed values. Relative paths resolve against the
// config file's folder.
package config

import "time"

// Config is the whole gateway.yaml.
type Config struct {
	Listen  string            `yaml:"listen"`
	Policy  Policy            `yaml:"policy"`
	Audit   Audit             `yaml:"audit"`
	Auth    Auth              `yaml:"auth"`
	Tenants map[string]Tenant `yaml:"tenants"`
	Tools   Tools             `yaml:"tools"`
	Limits  Limits            `yaml:"limits"`
	Log     Log               `yaml:"log"`
	Debug   Debug             `yaml:"debug"`

	// File is the absolute path of the file this was loaded from.
	File string `yaml:"-"`
}

// Policy configures the policy source.
type Policy struct {
	Dir            string        `yaml:"dir"`             // absolute after Load
	Watch          *bool         `yaml:"watch"`           // hot reload, default true
	ReloadDebounce time.Duration `yaml:"reload_debounce"` // default 250ms
	// DecisionCache is how many policy results each revision remembers
	// per entrypoint (default 4096; 0 turns the cache off). Only used when
	// the revision's policy is deterministic and ignores call_id and
	// digest; see the README.
	DecisionCache int `yaml:"decision_cache"`
}

// WatchEnabled reports whether the policy folder is hot-reloaded. After
// Load, Watch is never nil; this also covers a Config built by hand.
func (p Policy) WatchEnabled() bool {
	return p.Watch == nil || *p.Watch
}

// Audit configures the audit store.
type Audit struct {
	Driver    string `yaml:"driver"`     // sqlite | postgres
	DSN       string `yaml:"dsn"`        // sqlite: file path (absolute after Load)
	QueueSize int    `yaml:"queue_size"` // pending appends before 503, default 4096
	MaxBatch  int    `yaml:"max_batch"`  // events per transaction, default 256
	Chain     string `yaml:"chain"`      // this writer's chain segment id, default "main"
	// Retention prunes events older than this (at least 1h); 0 keeps
	// them forever, the default.
	Retention time.Duration `yaml:"retention"`
}

// Auth configures credentials.
type Auth struct {
	JWT     JWT      `yaml:"jwt"`
	APIKeys []APIKey `yaml:"api_keys"`
}

// JWT configures bearer JWT verification.
type JWT struct {
	HS256SecretFile string        `yaml:"hs256_secret_file"` // created on first start if missing
	JWKSFile        string        `yaml:"jwks_file"`         // RS256 / ES256 / EdDSA public keys
	Issuer          string        `yaml:"issuer"`
	Audience        string        `yaml:"audience"`
	TenantClaim     string        `yaml:"tenant_claim"` // default "tenant"
	RolesClaim      string        `yaml:"roles_claim"`  // default "roles"
	GroupsClaim     string        `yaml:"groups_claim"` // default "groups"
	Leeway          time.Duration `yaml:"leeway"`       // clock skew allowed, default 30s
}

// APIKey is a service principal. Only the SHA-256 of the key is stored.
type APIKey struct {
	ID     string   `yaml:"id"`
	SHA256 string   `yaml:"sha256"`
	Tenant string   `yaml:"tenant"`
	Roles  []string `yaml:"roles"`
	Groups []string `yaml:"groups"`
}

// Tenant configures one tenant.
type Tenant struct {
	Workspace string `yaml:"workspace"` // absolute after Load
	// Seed, when set, is a folder copied into Workspace on start if the
	// workspace does not exist yet (the demo tenant uses it).
	Seed string `yaml:"seed"`
	// Skills, when set, is the tenant's skill library (absolute after
	// Load): one folder per skill, each with a SKILL.md, served by the
	// skill tool. It must not overlap any workspace, so that no agent can
	// rewrite the instructions it is given.
	Skills string `yaml:"skills"`
}

// Tools selects the tools the gateway offers.
type Tools struct {
	Builtin []string `yaml:"builtin"`
}

// Limits are request-level ceilings.
type Limits struct {
	MaxBodyBytes   int64         `yaml:"max_body_bytes"`   // default 1 MiB
	MaxArgDepth    int           `yaml:"max_arg_depth"`    // default 32
	DefaultTimeout time.Duration `yaml:"default_timeout"`  // per call, default 30s
	MaxOutputBytes int           `yaml:"max_output_bytes"` // model-facing content, default 64 KiB
	// MaxBatchCalls bounds the calls of one POST /v1/batches (default 32).
	MaxBatchCalls int `yaml:"max_batch_calls"`
	// TenantConcurrency bounds how many batch calls of one tenant run at
	// once, across all its batches (default 8).
	TenantConcurrency int `yaml:"tenant_concurrency"`
}

// Log configures the process log.
type Log struct {
	Level  string `yaml:"level"`  // debug | info | warn | error, default info
	Format string `yaml:"format"` // text | json, default text
}

// Debug configures diagnostics that are off by default.
type Debug struct {
	// PprofListen, when set, serves net/http/pprof on this loopback
	// address (a separate listener, no authentication): for profiling the
	// gateway under load. Only loopback hosts are accepted.
	PprofListen string `yaml:"pprof_listen"`
}
