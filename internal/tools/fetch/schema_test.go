package fetch

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/internal/tools"
)

func TestSpecIsPublishedAsContracted(t *testing.T) {
	f := New(Options{})
	s := f.Spec()
	if s.Name != "fetch" || s.Action != "net.fetch" || s.Kind != tools.KindBuiltin || s.Description == "" {
		t.Fatalf("spec = %+v", s)
	}
	if len(s.Effects) != 1 || s.Effects[0] != "net.fetch" {
		t.Fatalf("effects = %v", s.Effects)
	}
	if want := (tools.Annotations{ReadOnly: true, OpenWorld: true}); s.Annotations != want {
		t.Fatalf("annotations = %+v, want %+v", s.Annotations, want)
	}
	if s.Limits.Timeout <= 0 || s.Limits.MaxOutputBytes < DefaultMaxBodyBytes {
		t.Fatalf("limits = %+v", s.Limits)
	}
	if _, err := tools.NewRegistry(f); err != nil {
		t.Fatal(err)
	}
}

func TestSchemaIsStrictAndBounded(t *testing.T) {
	raw := New(Options{}).Spec().InputSchema
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(raw))
	if err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://fetch.json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("mem://fetch.json")
	if err != nil {
		t.Fatalf("schema does not compile: %v", err)
	}

	var shape struct {
		Schema     string                    `json:"$schema"`
		Additional *bool                     `json:"additionalProperties"`
		Properties map[string]map[string]any `json:"properties"`
	}
	if err := json.Unmarshal([]byte(raw), &shape); err != nil {
		t.Fatal(err)
	}
	if shape.Schema != "https://json-schema.org/draft/2020-12/schema" || shape.Additional == nil || *shape.Additional {
		t.Fatalf("schema must be 2020-12 with additionalProperties false")
	}
	for name, p := range shape.Properties {
		if d, _ := p["description"].(string); d == "" {
			t.Errorf("property %s has no description", name)
		}
		if p["type"] == "string" && p["maxLength"] == nil && p["enum"] == nil {
			t.Errorf("string property %s is unbounded", name)
		}
	}

	tests := []struct {
		name  string
		inst  string
		valid bool
	}{
		{"url only", `{"url":"http://example.com/"}`, true},
		{"everything", `{"url":"http://x/","method":"POST","headers":{"X-A":"1","a~b":"2"},"body":"b"}`, true},
		{"no url", `{}`, false},
		{"unknown member", `{"url":"http://x/","timeout":5}`, false},
		{"unknown method", `{"url":"http://x/","method":"DELETE"}`, false},
		{"lower-case method", `{"url":"http://x/","method":"get"}`, false},
		{"header name with a space", `{"url":"http://x/","headers":{"X A":"1"}}`, false},
		{"header name with a colon", `{"url":"http://x/","headers":{"X:A":"1"}}`, false},
		{"header value not a string", `{"url":"http://x/","headers":{"X-A":1}}`, false},
		{"empty url", `{"url":""}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(tt.inst))
			if err != nil {
				t.Fatal(err)
			}
			err = schema.Validate(inst)
			if (err == nil) != tt.valid {
				t.Fatalf("valid = %v, want %v (%v)", err == nil, tt.valid, err)
			}
		})
	}
}
