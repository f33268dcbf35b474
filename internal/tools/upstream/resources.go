package upstream

import (
	"fmt"

	"github.com/toolgate/toolgate/internal/tools"
)

// Resources builds a tool's typed resources from its arguments, as
// configured (tools.upstream[].resources, tools.mcp[].resources): each
// declaration's "type" is the resource type, every other member a JSON
// pointer into the arguments whose value becomes that member (absent
// targets leave the member out). MCP upstream tools share it.
type Resources struct {
	rules []resourceRule
}

// NewResources checks and compiles resource declarations.
func NewResources(decl []map[string]string) (*Resources, error) {
	r := &Resources{}
	for i, d := range decl {
		rule := resourceRule{typ: d["type"], members: map[string][]string{}}
		if rule.typ == "" {
			return nil, fmt.Errorf("resource %d has no type", i)
		}
		for name, ptr := range d {
			if name == "type" {
				continue
			}
			toks, ok := pointerTokens(ptr)
			if !ok {
				return nil, fmt.Errorf("resource %d member %s: invalid JSON pointer", i, name)
			}
			rule.members[name] = toks
		}
		r.rules = append(r.rules, rule)
	}
	return r, nil
}

// Build returns the resources of args, one per declaration, in order.
func (r *Resources) Build(args map[string]any) []tools.Resource {
	res := make([]tools.Resource, 0, len(r.rules))
	for _, rule := range r.rules {
		out := tools.Resource{"type": rule.typ}
		for name, toks := range rule.members {
			if v, ok := lookup(args, toks); ok {
				out[name] = v
			}
		}
		res = append(res, out)
	}
	return res
}

// SchemaDefaults returns the "default" of each top-level property of an
// object schema: what Prepare fills in for absent arguments.
func SchemaDefaults(schema map[string]any) map[string]any { return schemaDefaults(schema) }

// Canonical is the RFC 8785 canonical JSON of a JSON-shaped value.
func Canonical(v any) ([]byte, error) { return canonical(v) }

// Digest is "sha256:" + hex of b.
func Digest(b []byte) string { return digestOf(b) }
