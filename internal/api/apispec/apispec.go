// Package apispec checks HTTP responses against api/openapi.yaml, so that
// tests catch any drift between the served API and its published contract.
// OpenAPI 3.1 schemas are JSON Schema 2020-12, so responses are validated
// with the same validator that enforces tool input schemas.
package apispec

import (
	"bytes"
	"fmt"
	"mime"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

const docURL = "toolgate:///openapi.json"

// Spec is a loaded OpenAPI document.
type Spec struct {
	doc      map[string]any
	compiler *jsonschema.Compiler
	paths    []pathTemplate
	// mu guards the compiler and the cache: parallel tests check
	// responses against one Spec.
	mu    sync.Mutex
	cache map[string]*jsonschema.Schema
}

type pathTemplate struct {
	template string
	re       *regexp.Regexp
}

// Load reads an OpenAPI 3.1 YAML document.
func Load(file string) (*Spec, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var y any
	if err := yaml.Unmarshal(b, &y); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	doc, ok := y.(map[string]any)
	if !ok || doc["openapi"] == nil {
		return nil, fmt.Errorf("%s: not an OpenAPI document", file)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(docURL, doc); err != nil {
		return nil, err
	}
	s := &Spec{doc: doc, compiler: c, cache: map[string]*jsonschema.Schema{}}
	paths, _ := doc["paths"].(map[string]any)
	for tmpl := range paths {
		s.paths = append(s.paths, pathTemplate{tmpl, templateRE(tmpl)})
	}
	sort.Slice(s.paths, func(i, j int) bool { return s.paths[i].template < s.paths[j].template })
	return s, nil
}

// Operations lists "METHOD /template" for every operation in the document.
func (s *Spec) Operations() []string {
	var out []string
	paths, _ := s.doc["paths"].(map[string]any)
	for tmpl, item := range paths {
		for method := range item.(map[string]any) {
			switch method {
			case "get", "post", "put", "patch", "delete":
				out = append(out, strings.ToUpper(method)+" "+tmpl)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Check validates one response: the operation must exist, the status must
// be documented for it, and a JSON body must match the documented schema
// (an NDJSON body: every line).
func (s *Spec) Check(method, path string, status int, contentType string, body []byte) error {
	tmpl := ""
	for _, p := range s.paths {
		if p.re.MatchString(path) {
			tmpl = p.template
			break
		}
	}
	code := strconv.Itoa(status)
	var op map[string]any
	if tmpl != "" {
		op, _ = s.doc["paths"].(map[string]any)[tmpl].(map[string]any)[strings.ToLower(method)].(map[string]any)
	}
	var resp map[string]any
	var ptr string
	if op == nil {
		// No operation matches: the answer must be one of the document's
		// x-unrouted-responses (404, 405, 401 under /v1/).
		resp, _ = s.unrouted()[code].(map[string]any)
		if resp == nil {
			if tmpl == "" {
				return fmt.Errorf("%s %s: path not in the OpenAPI document (and %d is not in x-unrouted-responses)", method, path, status)
			}
			return fmt.Errorf("%s %s: method not documented for %s (and %d is not in x-unrouted-responses)", method, path, tmpl, status)
		}
		ptr = "#/x-unrouted-responses/" + code
		tmpl = path
	} else {
		var ok bool
		resp, ok = op["responses"].(map[string]any)[code].(map[string]any)
		if !ok {
			return fmt.Errorf("%s %s: status %d not documented", method, tmpl, status)
		}
		ptr = "#/paths/" + escape(tmpl) + "/" + strings.ToLower(method) + "/responses/" + code
	}
	if ref, ok := resp["$ref"].(string); ok {
		ptr = ref
		resp = s.resolve(ref)
	}
	if method == "HEAD" {
		return nil // a HEAD answer has no body to check
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	content, _ := resp["content"].(map[string]any)
	if _, ok := content[mt]; !ok {
		return fmt.Errorf("%s %s %d: content type %q not documented", method, tmpl, status, contentType)
	}
	switch mt {
	case "application/json":
		return s.checkBody(ptr+"/content/application~1json/schema", method, tmpl, status, body)
	case "application/x-ndjson":
		return s.checkLines(ptr+"/content/application~1x-ndjson/schema", method, tmpl, status, body)
	}
	return nil
}

// checkLines validates an NDJSON body: every line, each ending in "\n",
// must match the documented schema, which describes one line (as OpenAPI
// 3.2's itemSchema does). An empty body has no lines.
func (s *Spec) checkLines(ptr, method, tmpl string, status int, body []byte) error {
	if len(body) == 0 {
		return nil
	}
	if body[len(body)-1] != '\n' {
		return fmt.Errorf("%s %s %d: NDJSON body does not end with a newline", method, tmpl, status)
	}
	lines := bytes.Split(body[:len(body)-1], []byte("\n"))
	for i, line := range lines {
		if err := s.checkBody(ptr, method, tmpl, status, line); err != nil {
			return fmt.Errorf("line %d of %d: %w", i+1, len(lines), err)
		}
	}
	return nil
}

// unrouted is the document's x-unrouted-responses: status → response.
func (s *Spec) unrouted() map[string]any {
	m, _ := s.doc["x-unrouted-responses"].(map[string]any)
	return m
}

// Statuses lists the documented statuses of the operation "METHOD
// /template" (sorted), or nil when there is no such operation.
func (s *Spec) Statuses(method, tmpl string) []string {
	op, _ := s.doc["paths"].(map[string]any)[tmpl].(map[string]any)[strings.ToLower(method)].(map[string]any)
	if op == nil {
		return nil
	}
	out := []string{}
	for code := range op["responses"].(map[string]any) {
		out = append(out, code)
	}
	sort.Strings(out)
	return out
}

// HasRequestBody reports whether the operation documents a request body.
func (s *Spec) HasRequestBody(method, tmpl string) bool {
	op, _ := s.doc["paths"].(map[string]any)[tmpl].(map[string]any)[strings.ToLower(method)].(map[string]any)
	return op != nil && op["requestBody"] != nil
}

// UnroutedStatuses lists the statuses of x-unrouted-responses, sorted.
func (s *Spec) UnroutedStatuses() []string {
	out := []string{}
	for code := range s.unrouted() {
		out = append(out, code)
	}
	sort.Strings(out)
	return out
}

func (s *Spec) checkBody(ptr, method, tmpl string, status int, body []byte) error {
	schema, err := s.schema(ptr)
	if err != nil {
		return err
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("%s %s %d: body is not JSON: %w", method, tmpl, status, err)
	}
	if err := schema.Validate(inst); err != nil {
		return fmt.Errorf("%s %s %d: body does not match the OpenAPI schema: %v\nbody: %s", method, tmpl, status, err, body)
	}
	return nil
}

func (s *Spec) schema(ptr string) (*jsonschema.Schema, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sc, ok := s.cache[ptr]; ok {
		return sc, nil
	}
	sc, err := s.compiler.Compile(docURL + ptr)
	if err != nil {
		return nil, fmt.Errorf("compile %s: %w", ptr, err)
	}
	s.cache[ptr] = sc
	return sc, nil
}

func (s *Spec) resolve(ref string) map[string]any {
	var cur any = s.doc
	for _, tok := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, _ := cur.(map[string]any)
		cur = m[tok]
	}
	m, _ := cur.(map[string]any)
	return m
}

// templateRE matches concrete paths of an OpenAPI path template: each
// {param} segment matches one non-empty segment.
func templateRE(tmpl string) *regexp.Regexp {
	segs := strings.Split(tmpl, "/")
	for i, seg := range segs {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			segs[i] = "[^/]+"
		} else {
			segs[i] = regexp.QuoteMeta(seg)
		}
	}
	return regexp.MustCompile("^" + strings.Join(segs, "/") + "$")
}

func escape(s string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(s) }
