package prepare

import (
	"github.com/toolgate/toolgate/internal/identity"
	"github.com/toolgate/toolgate/internal/tools"
)

// DocumentVersion is the version of the request document shape.
const DocumentVersion = 1

// principalValue is the principal object shared by both policy inputs.
func principalValue(id *identity.Identity) map[string]any {
	claims := map[string]any{}
	for k, v := range id.Claims {
		claims[k] = v
	}
	return map[string]any{
		"id":     id.Principal,
		"roles":  anyStrings(id.Roles),
		"groups": anyStrings(id.Groups),
		"claims": claims,
	}
}

// ToolValue is the tool object shown to policy.
func ToolValue(s *tools.Spec) map[string]any {
	v := map[string]any{
		"name":    s.Name,
		"kind":    s.Kind,
		"effects": anyStrings(s.Effects),
		"annotations": map[string]any{
			"read_only":   s.Annotations.ReadOnly,
			"destructive": s.Annotations.Destructive,
			"idempotent":  s.Annotations.Idempotent,
			"open_world":  s.Annotations.OpenWorld,
		},
		"annotations_trusted": !s.AnnotationsUntrusted,
	}
	if s.SchemaDigest != "" {
		v["schema_digest"] = s.SchemaDigest
	}
	if s.DefinitionDigest != "" {
		v["definition_digest"] = s.DefinitionDigest
	}
	return v
}

// AvailabilityInput is the input of the availability entrypoint: who asks
// for which tool, without arguments or resources (they are not decoded yet).
func AvailabilityInput(id *identity.Identity, sessionID string, s *tools.Spec) map[string]any {
	return map[string]any{
		"tenant":     id.Tenant,
		"principal":  principalValue(id),
		"client":     map[string]any{"id": id.Client},
		"session_id": sessionID,
		"tool":       ToolValue(s),
	}
}

// requestDocument builds the authorization input (CONTRACT §5) without its
// digest.
func requestDocument(id *identity.Identity, sessionID, callID string, s *tools.Spec, plan tools.Plan) map[string]any {
	res := make([]any, len(plan.Resources))
	for i, r := range plan.Resources {
		res[i] = map[string]any(r)
	}
	args := plan.Args
	if args == nil {
		args = map[string]any{}
	}
	return map[string]any{
		"version":    DocumentVersion,
		"tenant":     id.Tenant,
		"principal":  principalValue(id),
		"client":     map[string]any{"id": id.Client},
		"session_id": sessionID,
		"call_id":    callID,
		"tool":       ToolValue(s),
		"action":     s.Action,
		"resources":  res,
		"args":       args,
	}
}

func anyStrings(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// deepCopy copies a JSON-shaped value so callers can never reach the
// frozen document.
func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = deepCopy(e)
		}
		return m
	case []any:
		a := make([]any, len(v))
		for i, e := range v {
			a[i] = deepCopy(e)
		}
		return a
	case tools.Resource:
		return deepCopy(map[string]any(v))
	case []string:
		return anyStrings(v)
	}
	return v
}
