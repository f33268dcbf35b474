package skill

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/internal/tools"
)

// Name is the tool's name.
const Name = "skill"

// maxOutput is the tool's own cap on the instructions it returns.
const maxOutput = 64 << 10

// staticSchema is the caller-independent superset of every caller's
// schema: any well-formed skill name.
var staticSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "properties": {
    "name": {
      "type": "string", "minLength": 1, "maxLength": ` + strconv.Itoa(tools.MaxNameBytes) + `,
      "pattern": "` + tools.NamePattern + `",
      "description": "The skill to load."
    }
  },
  "required": ["name"],
  "additionalProperties": false
}`

// Tool is the skill tool over each tenant's library.
type Tool struct {
	spec tools.Spec
	libs map[string]*Library // by tenant; a tenant without one has no skills
}

// New returns the skill tool serving libs (by tenant).
func New(libs map[string]*Library) *Tool {
	return &Tool{libs: libs, spec: tools.Spec{
		Name: Name,
		Description: "Load a skill: instructions for a task, written by the people who run this agent. " +
			"Call it with the skill's name when a task matches the skill's description, then follow " +
			"the instructions it returns.",
		InputSchema: staticSchema,
		Kind:        tools.KindBuiltin,
		Action:      "skill.load",
		Effects:     []string{"skill.load"},
		Annotations: tools.Annotations{ReadOnly: true, Idempotent: true},
		Limits:      tools.Limits{Timeout: 10 * time.Second, MaxOutputBytes: maxOutput},
	}}
}

// Spec returns the published description.
func (t *Tool) Spec() *tools.Spec { return &t.spec }

// Choices lists the tenant's skills.
func (t *Tool) Choices(env *tools.Env) ([]tools.Choice, error) {
	lib := t.libs[env.Tenant]
	if lib == nil {
		return nil, nil
	}
	skills, err := lib.List()
	if err != nil {
		return nil, err
	}
	out := make([]tools.Choice, len(skills))
	for i, s := range skills {
		out[i] = tools.Choice{Value: s.Name, Description: s.Description, Policy: map[string]any{
			"type": "skill", "name": s.Name, "version": s.Version, "description": s.Description,
		}}
	}
	return out, nil
}

// SchemaFor renders the schema that accepts exactly the offered skills,
// with their descriptions in the argument's description.
func (t *Tool) SchemaFor(choices []tools.Choice) string {
	names := make([]string, len(choices))
	var desc strings.Builder
	desc.WriteString("The skill to load. Available skills:")
	for i, c := range choices {
		names[i] = c.Value
		fmt.Fprintf(&desc, "\n- %s: %s", c.Value, c.Description)
	}
	schema := map[string]any{
		"$schema": "https://json-schema.org/draft/2020-12/schema",
		"type":    "object",
		"properties": map[string]any{
			"name": map[string]any{"type": "string", "enum": names, "description": desc.String()},
		},
		"required":             []string{"name"},
		"additionalProperties": false,
	}
	b, err := json.Marshal(schema, json.Deterministic(true))
	if err != nil {
		panic(err) // strings only: cannot fail
	}
	return string(b)
}

// artifact is what Run serves: the prepared skill's identity and digest.
type artifact struct {
	lib   *Library
	skill *Skill
}

// Prepare loads the named skill and shows policy its name, version and
// digest.
func (t *Tool) Prepare(_ context.Context, env *tools.Env, args map[string]any) (tools.Plan, error) {
	name, err := tools.RequiredString(args, "name")
	if err != nil {
		return tools.Plan{}, err
	}
	lib := t.libs[env.Tenant]
	if lib == nil {
		return tools.Plan{}, notOffered()
	}
	s, err := lib.Load(name)
	if err != nil {
		// Checked against the offered enum already; a skill that broke
		// since is as absent as one that never existed.
		return tools.Plan{}, notOffered()
	}
	return tools.Plan{
		Args: map[string]any{"name": name},
		Resources: []tools.Resource{{
			"type": "skill", "name": s.Name, "version": s.Version, "digest": s.Digest,
		}},
		Artifact: &artifact{lib: lib, skill: s},
	}, nil
}

func notOffered() error {
	return &tools.ArgError{Pointer: "/name", Rule: "must be one of the allowed values"}
}

// Run serves the prepared skill, only if its SKILL.md is still the same
// file with the same content.
func (t *Tool) Run(_ context.Context, _ *tools.Env, a any, lim tools.Limits) (tools.Result, error) {
	art, ok := a.(*artifact)
	if !ok || art.skill == nil {
		return tools.Result{}, fmt.Errorf("skill: unexpected artifact %T", a)
	}
	now, err := art.lib.Load(art.skill.Name)
	if err != nil {
		return tools.Result{}, fmt.Errorf("skill: %w (%v)", tools.ErrTargetChanged, err)
	}
	if !os.SameFile(now.info, art.skill.info) || now.Digest != art.skill.Digest {
		return tools.Result{}, fmt.Errorf("skill %s: SKILL.md changed after the decision: %w", art.skill.Name, tools.ErrTargetChanged)
	}
	limit := t.spec.Limits.MaxOutputBytes
	if lim.MaxOutputBytes > 0 && lim.MaxOutputBytes < limit {
		limit = lim.MaxOutputBytes
	}
	content, truncated := capText(now.Instructions, limit)
	return tools.Result{
		Content:   content,
		Bytes:     len(now.Instructions),
		Truncated: truncated,
		Data:      map[string]any{"name": now.Name, "version": now.Version, "digest": now.Digest},
	}, nil
}

// capText cuts s to at most max bytes (whole runes), ending with a notice
// when it cut.
func capText(s string, max int) (string, bool) {
	if len(s) <= max {
		return s, false
	}
	const notice = "\n[skill instructions truncated]"
	n := max - len(notice)
	if n < 0 {
		n = 0
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + notice, true
}
