package mcptool

import (
	"errors"
	"fmt"
	"strings"

	encjson "encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/canonical"
	"github.com/toolgate/toolgate/internal/prepare"
	"github.com/toolgate/toolgate/internal/tools"
	"github.com/toolgate/toolgate/internal/tools/upstream"
)

// Definition is what an MCP server publishes about one tool and what a pin
// approves.
type Definition struct {
	Name        string         // the upstream's tool name
	Description string         // shown to models
	InputSchema map[string]any // a JSON Schema object schema, any draft
	Annotations map[string]any // as published; nil when absent
	Digest      string         // "sha256:" + hex of the canonical definition
}

// DefinitionOf builds the Definition of an SDK tool (as a client lists it)
// and its digest: the
// SHA-256 of the RFC 8785 form of
// {"annotations","description","input_schema","name"} (annotations null
// when absent).
func DefinitionOf(t *mcp.Tool) (Definition, error) {
	d := Definition{Name: t.Name, Description: t.Description}
	schema, err := jsonValue(t.InputSchema)
	if err != nil {
		return d, fmt.Errorf("input schema: %w", err)
	}
	obj, ok := schema.(map[string]any)
	if !ok {
		return d, errors.New("input schema is not a JSON object")
	}
	d.InputSchema = obj
	if t.Annotations != nil {
		a, err := jsonValue(t.Annotations)
		if err != nil {
			return d, fmt.Errorf("annotations: %w", err)
		}
		d.Annotations, _ = a.(map[string]any)
	}
	return d, d.seal()
}

// seal computes d.Digest from its parts.
func (d *Definition) seal() error {
	var ann any
	if d.Annotations != nil {
		ann = d.Annotations
	}
	b, err := canonical.Marshal(map[string]any{
		"name": d.Name, "description": d.Description, "input_schema": d.InputSchema, "annotations": ann,
	})
	if err != nil {
		return fmt.Errorf("canonical definition: %w", err)
	}
	d.Digest = upstream.Digest(b)
	return nil
}

// jsonValue round-trips v through JSON into plain JSON-shaped Go values.
func jsonValue(v any) (any, error) {
	b, err := encjson.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := encjson.NewDecoder(strings.NewReader(string(b)))
	var out any
	if err := dec.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// checkSchema compiles an upstream's input schema the way prepare will
// (no external references), so that one bad schema withholds one tool
// instead of failing the gateway.
func checkSchema(name string, schema map[string]any) (string, error) {
	if schema["type"] != "object" {
		return "", errors.New(`input schema must have "type": "object"`)
	}
	text, err := canonical.Marshal(schema)
	if err != nil {
		return "", err
	}
	if _, _, err := prepare.CompileInputSchema("toolgate:///mcp/"+name+"/input.json", string(text)); err != nil {
		return "", errors.New("input schema does not compile")
	}
	return string(text), nil
}

// annotationsOf reads the MCP hints conservatively: absent hints take the
// MCP defaults (destructive and open-world true, read-only and idempotent
// false); a hint that is not a boolean counts as absent.
func annotationsOf(a map[string]any) tools.Annotations {
	hint := func(key string, def bool) bool {
		if b, ok := a[key].(bool); ok {
			return b
		}
		return def
	}
	return tools.Annotations{
		ReadOnly:    hint("readOnlyHint", false),
		Destructive: hint("destructiveHint", true),
		Idempotent:  hint("idempotentHint", false),
		OpenWorld:   hint("openWorldHint", true),
	}
}

// Normalize maps "<namespace>-<tool>" to the tool-name rule: lower case,
// every run of other characters one '-', no leading or trailing '-'. A
// tool name with no letter or digit gives "". The result may still be
// invalid (too long); callers check tools.ValidName.
func Normalize(namespace, tool string) string {
	t := slug(tool)
	if t == "" {
		return ""
	}
	return slug(namespace) + "-" + t
}

func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
			continue
		}
		if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}

// CheckDefinition reports why d cannot be offered as the gateway tool
// name (nil when it can): its schema must be an object schema that
// compiles without external references.
func CheckDefinition(name string, d Definition) error {
	_, err := checkSchema(name, d.InputSchema)
	return err
}
