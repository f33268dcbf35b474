// Package decision is the embedded OPA engine. It loads a policy folder,
// compiles it once per revision in strict mode, prepares one query per
// entrypoint, and swaps revisions atomically so requests in flight finish
// on the revision they started with. Any evaluation error, or a decision
// that is not well formed, fails closed.
package decision

import (
	"errors"

	"github.com/toolgate/toolgate/internal/ratelimit"
)

// Entrypoints of the policy contract.
const (
	AvailabilityQuery = "data.toolgate.availability.allow"
	AuthzQuery        = "data.toolgate.authz.decision"
	MaskQuery         = "data.toolgate.audit.mask"
)

// Decision is the authorization result.
type Decision struct {
	Allow            bool
	ApprovalRequired bool
	Reasons          []string
	Message          string // model-safe text for denials, optional
	// Conceal asks that a denial be answered the way the tool answers an
	// unknown target (tools.Concealer), so that the caller cannot tell a
	// target it may not touch from one that does not exist. Only a denial
	// is concealed; the audit log records the denial either way.
	Conceal     bool
	Obligations Obligations
	// Raw is the whole decision object exactly as policy returned it
	// (members the contract does not name included), as JSON values with
	// numbers as numbers (see JSON). It is shared: never modify it.
	Raw map[string]any
}

// Obligations tighten a tool's limits. Zero means "no obligation".
type Obligations struct {
	TimeoutMS      int64
	MaxOutputBytes int64
	// ExcludePaths are workspace globs a tool that walks folders must skip
	// (a recursive read or a listing); the tool enforces them.
	ExcludePaths []string
	// ApprovalTTLMS shortens how long a held call waits for a human (it
	// never lengthens the configured approvals.ttl).
	ApprovalTTLMS int64
	// The command jail: WritePaths (nil when absent; present and empty
	// means nothing is writable) are the workspace globs programs may
	// write, ExecPaths absolute paths or globs they may execute besides
	// the approved programs, MemoryBytes and MaxProcesses tighten the
	// jail's limits, Network gives commands the host's network.
	WritePaths   []string
	ExecPaths    []string
	MemoryBytes  int64
	MaxProcesses int64
	Network      bool
	// RateLimits are the token buckets (per tenant and key) the call
	// takes one token from before it runs, all or none; any empty bucket
	// refuses it (outcome rate_limited). Normalized: sorted by key, one
	// limit per key.
	RateLimits []ratelimit.Limit
	// Raw holds every obligation as policy returned it (for audit).
	Raw map[string]any
}

// Errors callers inspect with errors.Is. All of them fail closed.
var (
	// ErrNoPolicy: no revision has ever loaded.
	ErrNoPolicy = errors.New("decision: no policy loaded")
	// ErrEvaluation: OPA returned an error (builtin error, conflict, ...).
	ErrEvaluation = errors.New("decision: policy evaluation failed")
	// ErrMalformed: the decision was undefined or not an object with a
	// boolean "allow" (authz), or not a boolean (availability), or the mask
	// was not a set of strings.
	ErrMalformed = errors.New("decision: malformed policy result")
)
