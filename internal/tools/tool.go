// Package tools defines what a tool is to the gateway: a published
// specification (name, description, input schema, effects) plus a two-step
// implementation. Prepare turns schema-validated arguments into typed
// resources and an immutable artifact; Run executes only that artifact.
//
// Tools never see HTTP, identities or policy. Sub-packages implement families
// of tools (workspace, fetch, shell, process, task, upstream).
package tools

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Kind values for Spec.Kind.
const (
	KindBuiltin  = "builtin"
	KindUpstream = "upstream"
	// KindMCP is a tool of an MCP upstream (tools.mcp): its definition
	// and annotations come from the upstream server.
	KindMCP = "mcp"
)

// Annotations are the hints published with a tool and shown to policy.
type Annotations struct {
	ReadOnly    bool `json:"read_only"`
	Destructive bool `json:"destructive"`
	Idempotent  bool `json:"idempotent"`
	OpenWorld   bool `json:"open_world"`
}

// Limits are a tool's own ceilings. Policy obligations may only tighten them.
type Limits struct {
	Timeout        time.Duration // whole call
	MaxOutputBytes int           // model-facing content
	// ExcludePaths are workspace-relative globs (OPA glob.match semantics
	// with "/" as delimiter, github.com/gobwas/glob) that a tool walking a
	// tree must neither list nor read. They come from policy obligations.
	ExcludePaths []string

	// The command jail (obligations; see sandbox.Jail). WritePaths nil
	// means the whole workspace is writable; non-nil (even empty) means
	// only these workspace globs. ExecPaths are absolute paths or globs
	// programs may execute besides the approved ones. MemoryBytes and
	// MaxProcesses tighten the configured jail limits (0: no obligation).
	// Network gives commands the host's network.
	WritePaths   []string
	ExecPaths    []string
	MemoryBytes  int64
	MaxProcesses int64
	Network      bool
}

// Spec is the published description of a tool. InputSchema is the JSON
// Schema (2020-12) shown to models and enforced by prepare: one document for
// both, so they cannot drift.
type Spec struct {
	Name        string
	Description string
	InputSchema string // JSON text of a JSON Schema 2020-12 object schema
	Kind        string // KindBuiltin or KindUpstream
	Action      string // e.g. "fs.read"
	Effects     []string
	Annotations Annotations
	Limits      Limits
	// SchemaDigest, when set, is "sha256:" + hex of the canonical
	// InputSchema. Upstream tools set it, so that an edited schema is
	// visible to policy and audit (tool.schema_digest).
	SchemaDigest string
	// DefinitionDigest, when set, is "sha256:" + hex of the canonical
	// definition (name, description, input schema, annotations) an MCP
	// upstream published: what mcp.lock.json pins (tool.definition_digest).
	DefinitionDigest string
	// AnnotationsUntrusted marks annotations that come from an upstream
	// rather than from the operator's config (tool.annotations_trusted:
	// false).
	AnnotationsUntrusted bool
}

// Resource is one normalized, typed target of a call as policy sees it, e.g.
// {"type":"file","path":"docs/a.md","access":"read"}. Values must be JSON
// values built from string, bool, float64, json.Number, []any and
// map[string]any only.
type Resource map[string]any

// Plan is what Prepare returns: the arguments with defaults applied (exactly
// what will run, shown to policy as input.args), the typed resources, and
// the tool-private artifact that Run will receive. Artifacts should be
// values of unexported types so that nothing but the tool's own Prepare can
// build one.
type Plan struct {
	Args      map[string]any
	Resources []Resource
	Artifact  any
}

// Env carries what a tool may touch for one tenant. The composition root
// builds one per tenant; the pipeline copies it per call and fills in the
// verified principal and the caller's session.
type Env struct {
	Tenant    string
	Principal string // the verified caller, for tools that record ownership
	SessionID string // "" when the call named no session
	Workspace *Workspace
	// Roles, CallID and RequestDigest describe the call being prepared
	// and run; prepare fills them in (RequestDigest only for Run, once the
	// document is built). Upstream tools assert them to their service.
	Roles         []string
	CallID        string
	RequestDigest string
}

// Result is what a tool returns when it ran. Content is what the model sees.
type Result struct {
	Content   string
	Data      map[string]any
	Bytes     int  // size of the tool's raw output before capping
	Truncated bool // content was capped
}

// Tool is one callable tool.
type Tool interface {
	Spec() *Spec
	// Prepare normalizes arguments that already passed the published schema
	// (types, required members and unknown members are checked). It may read
	// the environment (resolve paths, look up addresses) but has no effect.
	// Errors that describe bad arguments must be *ArgError.
	Prepare(ctx context.Context, env *Env, args map[string]any) (Plan, error)
	// Run executes the artifact that Prepare built, within lim. A target
	// that differs from the one prepared must make Run fail with an error
	// wrapping ErrTargetChanged, before any effect on the new target.
	Run(ctx context.Context, env *Env, artifact any, lim Limits) (Result, error)
}

// Withheld is implemented by a tool that may be withheld from every caller
// at run time: when WithheldReason is not empty the gateway offers it to
// nobody (the caller sees "tool unavailable", audit the reason). Commands
// are withheld where the kernel cannot build their jail.
type Withheld interface {
	WithheldReason() string
}

// Concealer is implemented by a tool that answers an id it does not know
// with an *ArgError (a process, a task). When policy denies a call with
// "conceal": true, the caller gets Concealed's answer instead of the
// denial, exactly as if the target did not exist; the audit log still
// records the denial. Such a tool must make every other Prepare error
// independent of the target (checked before the lookup, or deferred to
// Run for a target of another principal), so that nothing but policy's
// decision tells an existing target from a missing one.
type Concealer interface {
	Concealed() *ArgError
}

// ArgError is model-safe feedback about one argument: a JSON pointer into
// the arguments and the rule it broke. It must never carry a host path,
// file content or secret.
type ArgError struct {
	Pointer string // e.g. "/path"
	Rule    string // e.g. "must stay inside the workspace"
}

func (e *ArgError) Error() string { return fmt.Sprintf("%s: %s", e.Pointer, e.Rule) }

// ModelError is an error a tool raises on purpose for the model to read
// ("old_string not found"). Its Message is shown verbatim; it must be
// model-safe. Every other Run error is shown as "the tool failed".
type ModelError struct{ Message string }

func (e *ModelError) Error() string { return e.Message }

// ErrPermanent marks a Run error after which retrying, or going on with
// the run the call belongs to, cannot help (an upstream declared it). The
// model sees "the tool failed"; the API answers with a non-200 status the
// platform can act on.
var ErrPermanent = errors.New("the tool reported a permanent failure")

// ErrTargetChanged reports that what was prepared (a file's identity, a
// resolved address) is not what would be touched now.
var ErrTargetChanged = errors.New("target changed between prepare and invoke")

// MaxNameBytes is the longest tool name.
const MaxNameBytes = 64

// NamePattern is the tool-name rule as a regular expression (RE2 and
// ECMA-262 alike), for JSON Schemas that publish it; with a length of at
// most MaxNameBytes it accepts exactly what ValidName accepts.
const NamePattern = `^[a-z0-9]+(?:-[a-z0-9]+)*$`

// NameRule says the tool-name rule in words, for error messages.
const NameRule = "1 to 64 bytes of lower-case letters and digits, separated by single '-'"

// ValidName reports whether name follows the tool-name rule (CONTRACT.md
// §6): 1 to MaxNameBytes bytes of lower-case ASCII letters and digits,
// with inner hyphens that each stand alone (no leading, trailing or
// doubled '-', so "a--b" is not a name). It is the one rule for tool
// names wherever they are written or checked (config, registry, upstream
// and MCP tools, audit events) and for names that become part of one
// (MCP namespaces, see ValidNameOf) or follow it (skills).
func ValidName(name string) bool { return ValidNameOf(name, MaxNameBytes) }

// ValidNameOf is the tool-name rule with a cap of maxBytes instead of
// MaxNameBytes (never more).
func ValidNameOf(name string, maxBytes int) bool {
	if name == "" || len(name) > min(maxBytes, MaxNameBytes) {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z' || c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(name)-1 && name[i-1] != '-':
		default:
			return false
		}
	}
	return true
}
