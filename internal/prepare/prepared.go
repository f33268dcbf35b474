package prepare

import (
	"context"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/toolgate/toolgate/internal/tools"
)

// Prepared is a frozen tool call: the request document policy decides on,
// its digest, and the artifact that will run. Only this package builds one;
// its fields are unexported and accessors return copies, so what policy saw
// is what runs. Invocation never looks at the raw request again.
type Prepared struct {
	tool      tools.Tool
	env       *tools.Env
	callID    string
	sessionID string
	doc       map[string]any // includes "digest"
	digest    string
	key       [32]byte                  // the policy cache key: digest material without call_id
	input     func() (ast.Value, error) // doc as an OPA value, built once on first use
	artifact  any
}

// ToolName is the prepared tool's name.
func (p *Prepared) ToolName() string { return p.tool.Spec().Name }

// Spec is the prepared tool's published specification.
func (p *Prepared) Spec() *tools.Spec { return p.tool.Spec() }

// Tenant is the tenant the call is scoped to.
func (p *Prepared) Tenant() string { return p.env.Tenant }

// CallID identifies the call.
func (p *Prepared) CallID() string { return p.callID }

// SessionID is the caller's session, possibly empty.
func (p *Prepared) SessionID() string { return p.sessionID }

// Digest is "sha256:" + hex of the canonical request document without its
// digest member.
func (p *Prepared) Digest() string { return p.digest }

// Document returns a copy of the request document, digest included.
func (p *Prepared) Document() map[string]any { return deepCopy(p.doc).(map[string]any) }

// PolicyKey is the SHA-256 of the canonical request document without its
// per-call members (call_id, digest): equal for two calls whose documents
// differ only in those, which is what the decision cache keys on.
func (p *Prepared) PolicyKey() [32]byte { return p.key }

// PolicyInput is the request document as an OPA value, for the
// authorization and mask entrypoints. It is built on first use (a decision
// answered from the cache never needs it) and then shared: callers must not
// modify it.
func (p *Prepared) PolicyInput() (ast.Value, error) { return p.input() }

// Run executes the frozen artifact with limits lim. It is the only way a
// tool runs.
func (p *Prepared) Run(ctx context.Context, lim tools.Limits) (tools.Result, error) {
	return p.tool.Run(ctx, p.env, p.artifact, lim)
}

// Concealed is what the call answers when policy conceals its denial: the
// tool's own unknown-target answer (tools.Concealer), as the same
// *InvalidArgumentsError Prepare would have returned had the target not
// existed. It is nil when the tool cannot conceal.
func (p *Prepared) Concealed() *InvalidArgumentsError {
	c, ok := p.tool.(tools.Concealer)
	if !ok {
		return nil
	}
	ae := c.Concealed()
	if ae == nil {
		return nil
	}
	return invalid(ae.Pointer, ae.Rule)
}
