package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/prepare"
)

// upstreamYAML declares one valid upstream tool; tests derive bad ones.
const upstreamYAML = `  upstream:
    - name: maintenance-window
      description: Find the next maintenance window of a service.
      input_schema:
        type: object
        additionalProperties: false
        required: [service_id]
        properties:
          service_id: {type: string, minLength: 1, maxLength: 64}
          days: {type: integer, minimum: 1, maximum: 90, default: 7}
      annotations: {read_only: true, idempotent: true}
      action: maintenance.read
      resources:
        - {type: service, id: /service_id}
      endpoint:
        url: http://127.0.0.1:8081/maintenance-window
        timeout: 2s
`

func upstreamConfig(old, new string) string {
	y := goodYAML + upstreamYAML
	if !strings.Contains(y, old) {
		panic("fixture text not found: " + old)
	}
	return strings.Replace(y, old, new, 1)
}

func withAssertion(y string) string {
	return strings.Replace(y, "  jwt:\n", "  assertion:\n    signing_key_file: var/assertion-key.pem\n  jwt:\n", 1)
}

func TestUpstreamDeclarationLoadsWithDefaults(t *testing.T) {
	_, file := fixture(t, withAssertion(upstreamConfig("", "")))
	cfg, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Tools.Upstream) != 1 {
		t.Fatalf("upstream tools = %d", len(cfg.Tools.Upstream))
	}
	u := cfg.Tools.Upstream[0]
	if u.Endpoint.Method != "POST" || u.Endpoint.Timeout != 2*time.Second || u.Endpoint.MaxConcurrent != DefaultUpstreamConcurrency ||
		u.Limits.MaxResponseBytes != DefaultUpstreamResponseBytes || u.Action != "maintenance.read" {
		t.Fatalf("defaults not applied: %+v", u)
	}
	if !u.Annotations.ReadOnly || !u.Annotations.Idempotent || u.Annotations.Destructive {
		t.Fatalf("annotations: %+v", u.Annotations)
	}
	if u.Resources[0]["type"] != "service" || u.Resources[0]["id"] != "/service_id" {
		t.Fatalf("resources: %v", u.Resources)
	}
	// The schema is JSON text in the order it was written.
	want := `{"type":"object","additionalProperties":false,"required":["service_id"],"properties":{"service_id":{"type":"string","minLength":1,"maxLength":64},"days":{"type":"integer","minimum":1,"maximum":90,"default":7}}}`
	if string(u.InputSchema) != want {
		t.Fatalf("schema\n got %s\nwant %s", u.InputSchema, want)
	}
	a := cfg.Auth.Assertion
	if a.Issuer != "toolgate" || a.TTL != time.Minute || !strings.HasSuffix(a.SigningKeyFile, "/var/assertion-key.pem") || !strings.HasPrefix(a.SigningKeyFile, "/") {
		t.Fatalf("assertion: %+v", a)
	}
}

func TestUpstreamDeclarationErrorsNameTheKey(t *testing.T) {
	tests := []struct {
		name, yaml, key, problem string
	}{
		{"invalid name", withAssertion(upstreamConfig("name: maintenance-window", "name: Maintenance_Window")),
			"tools.upstream[0].name", "invalid tool name"},
		{"name too long", withAssertion(upstreamConfig("name: maintenance-window", "name: "+strings.Repeat("a", 65))),
			"tools.upstream[0].name", "invalid tool name"},
		{"doubled hyphen", withAssertion(upstreamConfig("name: maintenance-window", "name: maintenance--window")),
			"tools.upstream[0].name", "invalid tool name"},
		{"name of a built-in", withAssertion(upstreamConfig("name: maintenance-window", "name: read-file")),
			"tools.upstream[0].name", `duplicate tool "read-file" (also tools.builtin[0])`},
		{"missing schema", withAssertion(upstreamConfig("      input_schema:\n        type: object\n        additionalProperties: false\n        required: [service_id]\n        properties:\n          service_id: {type: string, minLength: 1, maxLength: 64}\n          days: {type: integer, minimum: 1, maximum: 90, default: 7}\n", "")),
			"tools.upstream[0].input_schema", "required"},
		{"schema that is not an object schema", withAssertion(upstreamConfig("        type: object\n", "        type: array\n")),
			"tools.upstream[0].input_schema", `"type": "object"`},
		{"schema that does not compile", withAssertion(upstreamConfig("minLength: 1,", "minLength: -1,")),
			"tools.upstream[0].input_schema", "invalid schema"},
		{"missing endpoint", withAssertion(upstreamConfig("      endpoint:\n        url: http://127.0.0.1:8081/maintenance-window\n        timeout: 2s\n", "")),
			"tools.upstream[0].endpoint.url", "required"},
		{"endpoint that is not http", withAssertion(upstreamConfig("url: http://127.0.0.1:8081/maintenance-window", "url: file:///etc/passwd")),
			"tools.upstream[0].endpoint.url", "absolute http or https URL"},
		{"endpoint with credentials", withAssertion(upstreamConfig("url: http://127.0.0.1", "url: http://u:p@127.0.0.1")),
			"tools.upstream[0].endpoint.url", "credentials"},
		{"GET endpoint", withAssertion(upstreamConfig("        timeout: 2s\n", "        timeout: 2s\n        method: GET\n")),
			"tools.upstream[0].endpoint.method", "POST, PUT or PATCH"},
		{"resource pointer that is not a pointer", withAssertion(upstreamConfig("id: /service_id", "id: service_id")),
			"tools.upstream[0].resources[0].id", "JSON pointer"},
		{"resource pointer to no property", withAssertion(upstreamConfig("id: /service_id", "id: /service")),
			"tools.upstream[0].resources[0].id", "points at no property"},
		{"resource without type", withAssertion(upstreamConfig("{type: service, id: /service_id}", "{id: /service_id}")),
			"tools.upstream[0].resources[0].type", "required"},
		{"missing description", withAssertion(upstreamConfig("      description: Find the next maintenance window of a service.\n", "")),
			"tools.upstream[0].description", "required"},
		{"no signing key", upstreamConfig("", ""), "auth.assertion.signing_key_file", "required when tools.upstream"},
		{"assertion ttl too long", strings.Replace(withAssertion(upstreamConfig("", "")), "  assertion:\n", "  assertion:\n    ttl: 1h\n", 1),
			"auth.assertion.ttl", "at most 10m0s"},
		{"missing published key", strings.Replace(withAssertion(upstreamConfig("", "")), "  assertion:\n", "  assertion:\n    published_key_files: [old.pem]\n", 1),
			"auth.assertion.published_key_files[0]", "no such file"},
		{"schema with an alias", withAssertion(upstreamConfig("        type: object\n", "        type: &t object\n        x: *t\n")),
			"tools.upstream[0].input_schema.x", "aliases"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, file := fixture(t, tt.yaml)
			_, err := Load(file)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, e := range configErrors(t, err) {
				if e.Key == tt.key && strings.Contains(e.Problem, tt.problem) {
					if !strings.HasSuffix(e.File, "gateway.yaml") {
						t.Fatalf("error does not name the file: %v", e)
					}
					return
				}
			}
			t.Fatalf("no error for %s containing %q in:\n%v", tt.key, tt.problem, err)
		})
	}
}

func TestDuplicateUpstreamToolIsAnError(t *testing.T) {
	second := strings.Replace(upstreamYAML, "  upstream:\n", "", 1)
	y := withAssertion(goodYAML + upstreamYAML + second)
	_, file := fixture(t, y)
	_, err := Load(file)
	if err == nil || !strings.Contains(err.Error(), `tools.upstream[1].name: duplicate tool "maintenance-window" (also tools.upstream[0])`) {
		t.Fatalf("err = %v", err)
	}
}

// A "$ref" outside the schema (a file, a URL, a relative document) is
// refused at load, naming the "$ref" and its line, exactly as the gateway
// would refuse it at start (prepare compiles schemas without a loader);
// a reference inside the schema loads.
func TestInputSchemaExternalRefIsRefusedWithItsLine(t *testing.T) {
	const old = "          service_id: {type: string, minLength: 1, maxLength: 64}\n"
	// A schema file that exists and is valid: a loader would read it.
	valid := filepath.Join(t.TempDir(), "id.json")
	if err := os.WriteFile(valid, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"file://" + valid, "file:///etc/hosts", "https://schemas.example/id.json", "id.json", "file:///etc/hosts#/x"} {
		t.Run(ref, func(t *testing.T) {
			y := withAssertion(upstreamConfig(old, "          service_id:\n            $ref: \""+ref+"\"\n"))
			_, file := fixture(t, y)
			_, err := Load(file)
			if err == nil {
				t.Fatal("Load succeeded")
			}
			wantLine := 0
			for i, l := range strings.Split(y, "\n") {
				if strings.Contains(l, "$ref:") {
					wantLine = i + 1
				}
			}
			const key = `tools.upstream[0].input_schema.properties.service_id["$ref"]`
			for _, e := range configErrors(t, err) {
				if e.Key == key && strings.Contains(e.Problem, "external schema references are not loaded") {
					if e.Line != wantLine {
						t.Fatalf("line %d, want %d: %v", e.Line, wantLine, e)
					}
					return
				}
			}
			t.Fatalf("no error for %s in:\n%v", key, err)
		})
	}
	t.Run("inside the schema", func(t *testing.T) {
		y := withAssertion(upstreamConfig(old, "          service_id: {$ref: \"#/$defs/id\"}\n        $defs:\n          id: {type: string, minLength: 1}\n"))
		_, file := fixture(t, y)
		cfg, err := Load(file)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := prepare.CompileInputSchema("toolgate:///tools/x/input.json", string(cfg.Tools.Upstream[0].InputSchema)); err != nil {
			t.Fatalf("prepare refuses what config loaded: %v", err)
		}
	})
}
