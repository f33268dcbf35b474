package prepare

import (
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// compileSchema compiles a tool's published input schema once at start.
// The same text is what GET /v1/tools publishes, so the schema a model sees
// is the schema enforced.
func compileSchema(tool, text string) (*jsonschema.Schema, error) {
	s, _, err := CompileInputSchema("toolgate:///tools/"+tool+"/input.json", text)
	if err != nil {
		return nil, fmt.Errorf("tool %s: %w", tool, err)
	}
	return s, nil
}

// Problems of an input schema that CompileInputSchema reports.
var (
	ErrSchemaNotJSON   = errors.New("input schema is not JSON")
	ErrSchemaNotObject = errors.New("input schema must be an object schema")
	// ErrExternalRef matches the *ExternalRefError of a schema whose
	// "$ref" (or "$schema") names a resource outside it.
	ErrExternalRef = errors.New("external schema references are not loaded")
)

// ExternalRefError reports a "$ref" (or "$schema") that names a resource
// outside the schema, a file or a URL: nothing is loaded.
type ExternalRefError struct {
	URL string // the resource, as resolved against the schema's location
}

func (e *ExternalRefError) Error() string {
	return fmt.Sprintf("%q: external schema references are not loaded; only references inside the schema (such as \"#/$defs/x\") are", e.URL)
}

// Is makes an ExternalRefError match ErrExternalRef.
func (e *ExternalRefError) Is(target error) bool { return target == ErrExternalRef }

// CompileInputSchema is how every input schema is compiled, at start
// (prepare), at config load (config) and for MCP tools (mcptool): text must
// be a JSON object schema ("type": "object"), compiled as the resource loc
// by NewSchemaCompiler, so a "$ref" outside the schema is refused
// (ErrExternalRef). It returns the compiled schema and the decoded
// document.
func CompileInputSchema(loc, text string) (*jsonschema.Schema, map[string]any, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrSchemaNotJSON, err)
	}
	obj, ok := doc.(map[string]any)
	if !ok || obj["type"] != "object" {
		return nil, nil, ErrSchemaNotObject
	}
	c := NewSchemaCompiler()
	if err := c.AddResource(loc, doc); err != nil {
		return nil, nil, err
	}
	s, err := c.Compile(loc)
	if err != nil {
		var le *jsonschema.LoadURLError
		if errors.As(err, &le) {
			err = &ExternalRefError{URL: le.URL}
		}
		return nil, nil, fmt.Errorf("input schema: %w", err)
	}
	return s, obj, nil
}

// NewSchemaCompiler is the compiler of every input schema: JSON Schema
// 2020-12 unless the schema declares another draft ("$schema"), and no
// loader, so a "$ref" can reach neither a file nor the network (schemas of
// MCP upstreams are untrusted).
func NewSchemaCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	return c
}

// noLoader refuses every external resource.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, ErrExternalRef
}

// validate checks args against the schema and turns failures into
// model-safe problems. Messages are written here rather than taken from the
// validator because some of its messages echo values.
func validate(s *jsonschema.Schema, args map[string]any) *InvalidArgumentsError {
	err := s.Validate(args)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return invalid("", "does not match the input schema")
	}
	out := &InvalidArgumentsError{}
	collect(ve, out)
	if len(out.Problems) == 0 {
		out.Problems = append(out.Problems, Problem{Rule: "does not match the input schema"})
	}
	return out
}

func collect(ve *jsonschema.ValidationError, out *InvalidArgumentsError) {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			collect(c, out)
		}
		return
	}
	ptr := pointer(ve.InstanceLocation)
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		for _, m := range k.Missing {
			out.Problems = append(out.Problems, Problem{ptr + "/" + escape(m), "missing required argument"})
		}
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			out.Problems = append(out.Problems, Problem{ptr + "/" + escape(p), "unknown argument (names are case-sensitive)"})
		}
	case *kind.Type:
		rule := "must be " + strings.Join(k.Want, " or ")
		if k.Got == "null" {
			rule += ", not null"
		}
		out.Problems = append(out.Problems, Problem{ptr, rule})
	case *kind.MinLength:
		out.Problems = append(out.Problems, Problem{ptr, fmt.Sprintf("must be at least %d characters", k.Want)})
	case *kind.MaxLength:
		out.Problems = append(out.Problems, Problem{ptr, fmt.Sprintf("must be at most %d characters", k.Want)})
	case *kind.Minimum:
		out.Problems = append(out.Problems, Problem{ptr, "must be >= " + k.Want.FloatString(0)})
	case *kind.Maximum:
		out.Problems = append(out.Problems, Problem{ptr, "must be <= " + k.Want.FloatString(0)})
	case *kind.ExclusiveMinimum:
		out.Problems = append(out.Problems, Problem{ptr, "must be > " + k.Want.FloatString(0)})
	case *kind.ExclusiveMaximum:
		out.Problems = append(out.Problems, Problem{ptr, "must be < " + k.Want.FloatString(0)})
	case *kind.MinItems:
		out.Problems = append(out.Problems, Problem{ptr, fmt.Sprintf("must have at least %d items", k.Want)})
	case *kind.MaxItems:
		out.Problems = append(out.Problems, Problem{ptr, fmt.Sprintf("must have at most %d items", k.Want)})
	case *kind.Enum:
		out.Problems = append(out.Problems, Problem{ptr, "must be one of the allowed values"})
	case *kind.Const:
		out.Problems = append(out.Problems, Problem{ptr, "must be the required constant"})
	case *kind.Pattern:
		out.Problems = append(out.Problems, Problem{ptr, "must match the pattern " + k.Want})
	case *kind.Format:
		out.Problems = append(out.Problems, Problem{ptr, "must be a valid " + k.Want})
	case *kind.UniqueItems:
		out.Problems = append(out.Problems, Problem{ptr, "items must be unique"})
	default:
		kw := "schema"
		if kp := ve.ErrorKind.KeywordPath(); len(kp) > 0 {
			kw = kp[0]
		}
		out.Problems = append(out.Problems, Problem{ptr, "violates the " + kw + " rule of the input schema"})
	}
}

func pointer(loc []string) string {
	var b strings.Builder
	for _, s := range loc {
		b.WriteByte('/')
		b.WriteString(escape(s))
	}
	return b.String()
}

// escape applies RFC 6901 escaping to one reference token.
func escape(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}
