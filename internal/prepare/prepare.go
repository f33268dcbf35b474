// Package prepare is the untrusted-argument boundary. It decodes a call's
// JSON arguments once and strictly, validates them against the tool's
// published schema, lets the tool normalize them into typed resources and
// an artifact, builds the request document and its digest, and freezes all
// of it into a Prepared value. Nothing here has an effect.
package prepare

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/tools"
)

// Preparer holds the compiled schema of every tool.
type Preparer struct {
	schemas  map[string]*jsonschema.Schema
	dynamic  schemaCache // caller-specific schemas of choosers
	maxDepth int
}

// Options configure a Preparer.
type Options struct {
	MaxDepth int // nesting bound of arguments; default DefaultMaxDepth
}

// New compiles the input schema of every tool in reg once.
func New(reg *tools.Registry, opts Options) (*Preparer, error) {
	p := &Preparer{schemas: map[string]*jsonschema.Schema{}, maxDepth: opts.MaxDepth}
	if p.maxDepth <= 0 {
		p.maxDepth = DefaultMaxDepth
	}
	for _, t := range reg.All() {
		s, err := compileSchema(t.Spec().Name, t.Spec().InputSchema)
		if err != nil {
			return nil, err
		}
		p.schemas[t.Spec().Name] = s
	}
	return p, nil
}

// Call is one call to prepare.
type Call struct {
	Identity  *identity.Identity
	SessionID string
	CallID    string
	Tool      tools.Tool
	Env       *tools.Env // the tenant's environment, selected by Identity.Tenant
	RawArgs   []byte     // the "arguments" member exactly as received
	// Schema, when set, is the caller-specific input schema of a
	// tools.Chooser, exactly as published to this caller; it replaces the
	// tool's static schema.
	Schema string
}

// Prepare turns a call into a frozen Prepared value. Bad arguments give an
// *InvalidArgumentsError; any other error is internal.
func (p *Preparer) Prepare(ctx context.Context, c Call) (*Prepared, error) {
	spec := c.Tool.Spec()
	schema, ok := p.schemas[spec.Name]
	if !ok {
		return nil, fmt.Errorf("prepare: tool %q has no compiled schema", spec.Name)
	}
	if c.Schema != "" {
		var err error
		if schema, err = p.dynamic.get(spec.Name, c.Schema); err != nil {
			return nil, fmt.Errorf("prepare %s: %w", spec.Name, err)
		}
	}
	if c.Env == nil || c.Env.Tenant != c.Identity.Tenant {
		return nil, errors.New("prepare: environment does not belong to the caller's tenant")
	}
	args, perr := decodeArguments(c.RawArgs, p.maxDepth)
	if perr != nil {
		return nil, perr
	}
	if perr := validate(schema, args); perr != nil {
		return nil, perr
	}
	// The tool sees, and the frozen call keeps, its own copy of the
	// environment naming this call.
	env := *c.Env
	env.Principal = c.Identity.Principal
	env.Roles = append([]string(nil), c.Identity.Roles...)
	env.CallID = c.CallID
	env.SessionID = c.SessionID
	env.RequestDigest = ""
	plan, err := c.Tool.Prepare(ctx, &env, args)
	if err != nil {
		var ae *tools.ArgError
		if errors.As(err, &ae) {
			return nil, invalid(ae.Pointer, ae.Rule)
		}
		return nil, fmt.Errorf("prepare %s: %w", spec.Name, err)
	}
	// The tool's plan is copied so that nothing it keeps can change the
	// frozen document afterwards.
	plan.Args = deepCopy(plan.Args).(map[string]any)
	for i, r := range plan.Resources {
		plan.Resources[i] = deepCopy(map[string]any(r)).(map[string]any)
	}
	doc := requestDocument(c.Identity, c.SessionID, c.CallID, spec, plan)
	digest, key, err := digestAndKey(doc)
	if err != nil {
		return nil, fmt.Errorf("prepare %s: digest: %w", spec.Name, err)
	}
	doc["digest"] = digest
	env.RequestDigest = digest
	// doc is frozen from here on, so converting it later is converting it
	// now.
	input := sync.OnceValues(func() (ast.Value, error) { return ast.InterfaceToValue(doc) })
	return &Prepared{
		tool:      c.Tool,
		env:       &env,
		callID:    c.CallID,
		sessionID: c.SessionID,
		doc:       doc,
		digest:    digest,
		key:       key,
		input:     input,
		artifact:  plan.Artifact,
	}, nil
}
