// Package config loads and validates gateway.yaml. It is the only package
// that reads configuration files or the environment for settings; every
// other package receives typed values. Relative paths resolve against the
// config file's folder.
package config

import (
	"slices"
	"time"

	"github.com/toolgate/toolgate/internal/auth"
	"github.com/toolgate/toolgate/internal/sandbox"
	"github.com/toolgate/toolgate/internal/telemetry"
)

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
	// Approvals configures calls held for a human.
	Approvals Approvals `yaml:"approvals"`
	Debug     Debug     `yaml:"debug"`
	// Sandbox configures the jail commands run in.
	Sandbox Sandbox `yaml:"sandbox"`
	// Telemetry configures OpenTelemetry tracing.
	Telemetry Telemetry `yaml:"telemetry"`
	// MCP configures the MCP front door (/mcp).
	MCP MCPServer `yaml:"mcp"`
	// Console configures the web console (/console).
	Console Console `yaml:"console"`

	// File is the absolute path of the file this was loaded from.
	File string `yaml:"-"`
}

// Policy configures the policy source.
type Policy struct {
	Dir string `yaml:"dir"` // absolute after Load
	// Tests is a folder of the pack's Rego tests (absolute after Load):
	// a load or reload of policy.dir whose tests fail or error is
	// rejected, the previous revision serving on. Only with policy.dir.
	Tests          string        `yaml:"tests"`
	Watch          *bool         `yaml:"watch"`           // hot reload, default true
	ReloadDebounce time.Duration `yaml:"reload_debounce"` // default 250ms
	// Shadow is a second policy evaluated beside the enforced one on every
	// authorization; it never changes an outcome: a folder, a bundle file
	// or a bundle URL (paths absolute after Load, "" for none). Bundles
	// follow the poll and signing settings of the enforced policy.
	Shadow string `yaml:"shadow"`
	// Bundle is an OPA bundle file (.tar.gz, absolute after Load) or an
	// http(s) bundle server URL, instead of Dir.
	Bundle string `yaml:"bundle"`
	// PollInterval is how often a bundle URL is polled; default 30s.
	PollInterval time.Duration `yaml:"poll_interval"`
	// PollMaxBackoff bounds the wait after failed polls; default 5m.
	PollMaxBackoff time.Duration `yaml:"poll_max_backoff"`
	// Signing, when set, makes bundle signatures mandatory.
	Signing *Signing `yaml:"signing"`
	// DecisionCache is how many policy results each revision remembers
	// per entrypoint (default 4096; 0 turns the cache off). Only used when
	// the revision's policy is deterministic and ignores call_id and
	// digest; see docs/operations.md "Decision cache".
	DecisionCache int `yaml:"decision_cache"`
}

// Signing lists the keys that verify bundle signatures (.signatures.json).
type Signing struct {
	Keys  map[string]SigningKey `yaml:"keys"`  // by key id ("keyid" of the signature)
	Scope string                `yaml:"scope"` // required "scope" claim, optional
}

// SigningKey is one verification key.
type SigningKey struct {
	Algorithm string `yaml:"algorithm"` // default RS256
	KeyFile   string `yaml:"key_file"`  // PEM public key (or HMAC secret); absolute after Load
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
	// Chain is deprecated and ignored: the log is sequenced in the
	// database (each tenant's Merkle tree), so replicas need no value of
	// their own. Accepted so that older configurations still load; the
	// gateway warns when it is set.
	Chain string `yaml:"chain"`
	// Retention prunes events older than this (at least 1h); 0 keeps
	// them forever, the default.
	Retention time.Duration `yaml:"retention"`
	// SigningKeyFile holds the Ed25519 key that signs the tenants'
	// checkpoints (absolute after Load), created with mode 0600 on first
	// start. Default: audit-signing.key beside the SQLite database, or
	// var/audit-signing.key beside the config for PostgreSQL. Every
	// replica of one database must use the same file (a shared secret,
	// such as a Kubernetes Secret mounted read-only).
	SigningKeyFile string `yaml:"signing_key_file"`
	// CheckpointInterval is how soon a signed checkpoint covers a new
	// event (default 1s).
	CheckpointInterval time.Duration `yaml:"checkpoint_interval"`
	// CheckpointFile, when set, gets every checkpoint this gateway signs
	// appended (absolute after Load): a witness to ship elsewhere.
	CheckpointFile string `yaml:"checkpoint_file"`
}

// Auth configures credentials.
type Auth struct {
	JWT     JWT      `yaml:"jwt"`
	APIKeys []APIKey `yaml:"api_keys"`
	// Assertion configures the identity assertions the gateway signs for
	// upstream tools.
	Assertion Assertion `yaml:"assertion"`
}

// JWT configures bearer JWT verification; auth owns it.
type JWT = auth.JWT

// APIKey is a service principal; auth owns it.
type APIKey = auth.APIKey

// AuthConfig is what the authenticator needs: the auth section (jwt,
// api_keys) and the names of the configured tenants, sorted.
func (c *Config) AuthConfig() auth.Config {
	tenants := make([]string, 0, len(c.Tenants))
	for name := range c.Tenants {
		tenants = append(tenants, name)
	}
	slices.Sort(tenants)
	return auth.Config{JWT: c.Auth.JWT, APIKeys: c.Auth.APIKeys, Tenants: tenants}
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
	// Limits override the gateway-wide limits for this tenant.
	Limits TenantLimits `yaml:"limits"`
}

// TenantLimits are one tenant's own ceilings; a key left out takes the
// gateway-wide value under limits.
type TenantLimits struct {
	// WorkspaceBytes overrides limits.workspace_bytes (nil: not set).
	WorkspaceBytes *int64 `yaml:"workspace_bytes"`
	// CPUWeight overrides limits.cpu_weight (nil: not set).
	CPUWeight *int `yaml:"cpu_weight"`
}

// CPUWeight is tenant's share of a contended CPU against other tenants:
// its own tenants.<name>.limits.cpu_weight, else limits.cpu_weight, else
// sandbox.DefaultCPUWeight (a Config built by hand).
func (c *Config) CPUWeight(tenant string) int {
	if n := c.Tenants[tenant].Limits.CPUWeight; n != nil && *n > 0 {
		return *n
	}
	if c.Limits.CPUWeight > 0 {
		return c.Limits.CPUWeight
	}
	return sandbox.DefaultCPUWeight
}

// WorkspaceBytes is the disk space tenant's workspace may take: its own
// tenants.<name>.limits.workspace_bytes, else limits.workspace_bytes,
// else DefaultWorkspaceBytes (a Config built by hand).
func (c *Config) WorkspaceBytes(tenant string) int64 {
	if n := c.Tenants[tenant].Limits.WorkspaceBytes; n != nil && *n > 0 {
		return *n
	}
	if c.Limits.WorkspaceBytes > 0 {
		return c.Limits.WorkspaceBytes
	}
	return DefaultWorkspaceBytes
}

// Tools selects the tools the gateway offers.
type Tools struct {
	Builtin []string `yaml:"builtin"`
	// Upstream declares application tools served by HTTP services, listed
	// after the built-ins in declaration order.
	Upstream []Upstream `yaml:"upstream"`
	// MCP declares MCP servers whose tools are offered, governed, after
	// the upstream tools.
	MCP []MCPUpstream `yaml:"mcp"`
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
	// TenantCommands bounds how many command-tool calls (bash, a
	// background start included) of one tenant run at once, single and
	// batch calls alike, under the gateway's global cap of 64 calls
	// (default 8).
	TenantCommands int `yaml:"tenant_commands"`
	// IdempotencyTTL is how long the response of a call whose call_id the
	// caller chose is kept for its retries, from when it was answered
	// (default 24h); pruned after that (docs/http-api.md "Retries and
	// idempotency").
	IdempotencyTTL time.Duration `yaml:"idempotency_ttl"`
	// TenantRate and TenantBurst bound the authenticated requests of one
	// tenant on each replica (a token bucket: TenantRate per second,
	// TenantBurst at once), checked right after authentication and before
	// any body is read, to protect the gateway itself. 0 (default) turns
	// it off; TenantBurst defaults to TenantRate rounded up.
	TenantRate  float64 `yaml:"tenant_rate"`
	TenantBurst int     `yaml:"tenant_burst"`
	// TenantLongPolls bounds the long polls (GET /v1/calls/{id}?wait=) of
	// one tenant waiting at once on each replica (default 100).
	TenantLongPolls int `yaml:"tenant_long_polls"`
	// WorkspaceBytes is the disk space each tenant's workspace may take
	// (default 1 GiB); tenants.<name>.limits.workspace_bytes overrides it.
	// Enforced by the kernel where the workspace is a btrfs subvolume
	// with a qgroup limit, else measured by the gateway
	// (docs/security-model.md "Workspace quotas").
	WorkspaceBytes int64 `yaml:"workspace_bytes"`
	// CPUWeight is each tenant's share of a contended CPU against the
	// others (1-10000, default 100; cgroup v2's cpu.weight): all the jails
	// of a tenant share one CPU cgroup of that weight, however many
	// processes they run. tenants.<name>.limits.cpu_weight overrides it.
	CPUWeight int `yaml:"cpu_weight"`
}

// Sandbox configures the command jail (docs/security-model.md "Security
// model").
type Sandbox struct {
	// Mode is "jail" (default): every program runs in its own namespaces
	// with a filesystem view built from the decision, and where the kernel
	// cannot build that jail the command tools are not offered; or
	// "landlock-only" (development only): the older confinement, writes
	// bounded to the workspace, no network, the host readable.
	Mode string `yaml:"mode"`
	// UID and GID are the host ids programs run as when the gateway runs
	// as root (default 65534, nobody); a gateway that is not root runs
	// them as its own uid without capabilities.
	UID int `yaml:"uid"`
	GID int `yaml:"gid"`
	// Resource limits of every program (obligations only tighten them):
	// memory (default 1 GiB: of the whole jail where a memory cgroup can
	// be made, else of each process's data), tasks of the jail
	// (default 128), CPU seconds per process (default 120), largest file
	// written (default 1 GiB), open files (default 1024).
	MemoryBytes   int64 `yaml:"memory_bytes"`
	MaxProcesses  int64 `yaml:"max_processes"`
	CPUSeconds    int64 `yaml:"cpu_seconds"`
	FileSizeBytes int64 `yaml:"file_size_bytes"`
	OpenFiles     int64 `yaml:"open_files"`
	// MemoryCgroup (default true) bounds a jail's memory as a whole with
	// a cgroup of its own where the kernel lets the gateway make one
	// (cgroup v1 memory controller, writable); false keeps the
	// per-process RLIMIT_DATA everywhere.
	MemoryCgroup bool `yaml:"memory_cgroup"`
	// Helper is the confinement helper binary (cmd/toolgate-sandbox).
	// Empty: toolgate-sandbox beside the gateway binary when it is there,
	// else the gateway binary itself (`gateway sandbox-exec`, slower to
	// start: ~11 ms of package initialisation per program).
	Helper string `yaml:"helper"`
}

// Log configures the process log.
type Log struct {
	Level  string `yaml:"level"`  // debug | info | warn | error, default info
	Format string `yaml:"format"` // text | json, default text
}

// Approvals configures calls that policy holds for a human
// (approval_required).
type Approvals struct {
	// TTL is how long a held call waits for a decision; a policy
	// obligation (approval_ttl_ms) may shorten it. Default 1h.
	TTL time.Duration `yaml:"ttl"`
	// QuestionTTL is how long an ask-user question waits for the user's
	// answer; the same obligation may shorten it. Default 1h.
	QuestionTTL time.Duration `yaml:"question_ttl"`
	// MaxPending bounds the held calls and ask-user questions of one
	// tenant that are pending at once (default 1000): a call that would
	// be held or ask beyond it is refused (429, outcome rate_limited).
	MaxPending int `yaml:"max_pending"`
}

// Debug configures diagnostics that are off by default.
type Debug struct {
	// PprofListen, when set, serves net/http/pprof on this loopback
	// address (a separate listener, no authentication): for profiling the
	// gateway under load. Only loopback hosts are accepted.
	PprofListen string `yaml:"pprof_listen"`
}

// Telemetry configures OpenTelemetry tracing; telemetry owns it.
type Telemetry = telemetry.Config
