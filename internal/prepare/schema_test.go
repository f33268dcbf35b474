package prepare

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// CompileInputSchema is the one compiler of input schemas (config load,
// start, MCP tools): an object schema with references inside itself
// compiles; any reference that would need loading is an *ExternalRefError
// naming the resource, even when the file exists and is a valid schema.
func TestCompileInputSchema(t *testing.T) {
	valid := filepath.Join(t.TempDir(), "id.json")
	if err := os.WriteFile(valid, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	const loc = "toolgate:///tools/t/input.json"
	if _, obj, err := CompileInputSchema(loc, `{"type":"object","properties":{"id":{"$ref":"#/$defs/id"}},"$defs":{"id":{"type":"string"}}}`); err != nil || obj["type"] != "object" {
		t.Fatalf("internal reference: %v %v", obj, err)
	}
	for ref, url := range map[string]string{
		"file://" + valid:          "file://" + valid,
		"https://x.example/a.json": "https://x.example/a.json",
		"other.json#/x":            "toolgate:///tools/t/other.json",
	} {
		_, _, err := CompileInputSchema(loc, `{"type":"object","properties":{"id":{"$ref":"`+ref+`"}}}`)
		var ext *ExternalRefError
		if !errors.Is(err, ErrExternalRef) || !errors.As(err, &ext) || ext.URL != url {
			t.Errorf("$ref %q: err = %v, want an ExternalRefError for %q", ref, err, url)
		}
	}
	if _, _, err := CompileInputSchema(loc, `{"type":"string"}`); !errors.Is(err, ErrSchemaNotObject) {
		t.Errorf("string schema: %v", err)
	}
	if _, _, err := CompileInputSchema(loc, `{"type":`); !errors.Is(err, ErrSchemaNotJSON) {
		t.Errorf("not JSON: %v", err)
	}
}
