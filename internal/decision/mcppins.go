package decision

import (
	"context"
	"fmt"
	"regexp"

	"github.com/open-policy-agent/opa/v1/rego"
)

// MCPPinsQuery is where a policy folder or bundle may approve MCP tool
// definitions: an object {"<upstream>": {"<upstream tool>": "sha256:…"}}
// (data or a rule), beside mcp.lock.json.
const MCPPinsQuery = "data.toolgate.mcp_pins"

var pinDigest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// MCPPins returns the MCP definition pins this revision's data approves,
// by upstream and tool (nil when it has none). A value of another shape is
// an error: no pin of it counts.
func (r *Revision) MCPPins(ctx context.Context) (map[string]map[string]string, error) {
	if r.compiled == nil {
		return nil, nil
	}
	rs, err := rego.New(
		rego.Query(MCPPinsQuery),
		rego.Compiler(r.compiled.compiler),
		rego.Store(r.compiled.store),
		rego.StrictBuiltinErrors(true),
	).Eval(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrEvaluation, MCPPinsQuery, err)
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil, nil
	}
	top, ok := rs[0].Expressions[0].Value.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s must be an object of upstreams", MCPPinsQuery)
	}
	out := make(map[string]map[string]string, len(top))
	for up, v := range top {
		tools, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s[%q] must be an object of tool digests", MCPPinsQuery, up)
		}
		m := make(map[string]string, len(tools))
		for name, d := range tools {
			s, ok := d.(string)
			if !ok || !pinDigest.MatchString(s) {
				return nil, fmt.Errorf("%s[%q][%q] must be \"sha256:\" and 64 hex digits", MCPPinsQuery, up, name)
			}
			m[name] = s
		}
		out[up] = m
	}
	return out, nil
}
