package workspace

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/toolgate/toolgate/internal/tools"
)

func compileSchema(t *testing.T, tool tools.Tool) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(tool.Spec().InputSchema))
	if err != nil {
		t.Fatalf("%s: schema is not JSON: %v", tool.Spec().Name, err)
	}
	c := jsonschema.NewCompiler()
	url := "mem://" + tool.Spec().Name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(url)
	if err != nil {
		t.Fatalf("%s: schema does not compile: %v", tool.Spec().Name, err)
	}
	return s
}

func TestToolsArePublishedInOrderWithValidSpecs(t *testing.T) {
	want := []string{"read-file", "write-file", "edit-file", "glob", "grep"}
	ts := Tools()
	if len(ts) != len(want) {
		t.Fatalf("Tools() has %d tools, want %d", len(ts), len(want))
	}
	if _, err := tools.NewRegistry(ts...); err != nil {
		t.Fatalf("registry refuses the tools: %v", err)
	}
	for i, tool := range ts {
		s := tool.Spec()
		if s.Name != want[i] {
			t.Errorf("tool %d is %q, want %q", i, s.Name, want[i])
		}
		if s.Kind != tools.KindBuiltin || s.Action == "" || s.Description == "" {
			t.Errorf("%s: incomplete spec %+v", s.Name, s)
		}
		if s.Limits.Timeout <= 0 || s.Limits.MaxOutputBytes <= 0 {
			t.Errorf("%s: limits must be set: %+v", s.Name, s.Limits)
		}
	}
}

func TestSchemasAreStrictObjectsWithDescribedBoundedProperties(t *testing.T) {
	for _, tool := range Tools() {
		t.Run(tool.Spec().Name, func(t *testing.T) {
			compileSchema(t, tool)
			var doc struct {
				Schema     string                    `json:"$schema"`
				Type       string                    `json:"type"`
				Additional *bool                     `json:"additionalProperties"`
				Properties map[string]map[string]any `json:"properties"`
				Required   []string                  `json:"required"`
			}
			if err := json.Unmarshal([]byte(tool.Spec().InputSchema), &doc); err != nil {
				t.Fatal(err)
			}
			if doc.Schema != "https://json-schema.org/draft/2020-12/schema" || doc.Type != "object" {
				t.Errorf("$schema/type = %q/%q", doc.Schema, doc.Type)
			}
			if doc.Additional == nil || *doc.Additional {
				t.Error("additionalProperties must be false")
			}
			for name, p := range doc.Properties {
				if d, _ := p["description"].(string); d == "" {
					t.Errorf("property %s has no description", name)
				}
				if p["type"] == "string" && p["maxLength"] == nil {
					t.Errorf("string property %s has no maxLength", name)
				}
			}
			for _, r := range doc.Required {
				if _, ok := doc.Properties[r]; !ok {
					t.Errorf("required %s is not a property", r)
				}
			}
		})
	}
}

func TestSchemasEnforceTheDocumentedBounds(t *testing.T) {
	byName := map[string]tools.Tool{}
	for _, tool := range Tools() {
		byName[tool.Spec().Name] = tool
	}
	cases := []struct {
		tool  string
		args  string
		valid bool
	}{
		{"read-file", `{"path":"a"}`, true},
		{"read-file", `{"path":"a","offset":1,"limit":10000}`, true},
		{"read-file", `{"path":""}`, false},
		{"read-file", `{"path":"a","offset":0}`, false},
		{"read-file", `{"path":"a","limit":10001}`, false},
		{"read-file", `{"path":"a","limit":1.5}`, false},
		{"read-file", `{"path":"a","extra":1}`, false},
		{"read-file", `{}`, false},
		{"write-file", `{"path":"a","content":""}`, true},
		{"write-file", `{"path":"a"}`, false},
		{"edit-file", `{"path":"a","old_string":"x","new_string":""}`, true},
		{"edit-file", `{"path":"a","old_string":"","new_string":"y"}`, false},
		{"edit-file", `{"path":"a","old_string":"x","new_string":"y","replace_all":"yes"}`, false},
		{"glob", `{"pattern":"**/*.go","path":"src"}`, true},
		{"glob", `{"path":"src"}`, false},
		{"grep", `{"pattern":"x","path":".","glob":"*.go","ignore_case":true}`, true},
		{"grep", `{"pattern":"x","recursive":true}`, false},
	}
	for _, c := range cases {
		s := compileSchema(t, byName[c.tool])
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(c.args))
		if err != nil {
			t.Fatal(err)
		}
		err = s.Validate(v)
		if (err == nil) != c.valid {
			t.Errorf("%s %s: valid = %v, want %v (%v)", c.tool, c.args, err == nil, c.valid, err)
		}
	}
}

// Plan.Args is shown to policy as what will run, so it must still satisfy
// the published schema once defaults are filled in.
func TestPlannedArgsWithDefaultsStillMatchTheSchema(t *testing.T) {
	env, dir := testEnv(t)
	writeFiles(t, dir, map[string]string{"a.txt": "x\n"})
	cases := []struct {
		tool tools.Tool
		args map[string]any
		want map[string]any
	}{
		{NewReadFile(), map[string]any{"path": "a.txt"},
			map[string]any{"path": "a.txt", "offset": 1.0, "limit": 2000.0}},
		{NewWriteFile(), map[string]any{"path": "b.txt", "content": "y"},
			map[string]any{"path": "b.txt", "content": "y"}},
		{NewEditFile(), map[string]any{"path": "a.txt", "old_string": "x", "new_string": "y"},
			map[string]any{"path": "a.txt", "old_string": "x", "new_string": "y", "replace_all": false}},
		{NewGlob(), map[string]any{"pattern": "*"},
			map[string]any{"pattern": "*", "path": "."}},
		{NewGrep(), map[string]any{"pattern": "x"},
			map[string]any{"pattern": "x", "path": ".", "ignore_case": false}},
	}
	for _, c := range cases {
		t.Run(c.tool.Spec().Name, func(t *testing.T) {
			given := len(c.args)
			plan := mustPrepare(t, c.tool, env, c.args)
			if len(c.args) != given {
				t.Errorf("Prepare modified the caller's args: %v", c.args)
			}
			if len(plan.Args) != len(c.want) {
				t.Fatalf("Args = %v, want %v", plan.Args, c.want)
			}
			for k, v := range c.want {
				if plan.Args[k] != v {
					t.Errorf("Args[%s] = %#v, want %#v", k, plan.Args[k], v)
				}
			}
			if err := compileSchema(t, c.tool).Validate(plan.Args); err != nil {
				t.Errorf("planned args fail the schema: %v", err)
			}
		})
	}
}
