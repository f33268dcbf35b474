package mcptool

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/tools"
)

func TestNormalizeFollowsTheToolNameRule(t *testing.T) {
	for _, c := range []struct{ ns, tool, want string }{
		{"notes", "search_notes", "notes-search-notes"},
		{"notes", "Get.Note", "notes-get-note"},
		{"notes", "--a//b--", "notes-a-b"},
		{"notes", "___", ""},
		{"notes", "ünïcode", "notes-n-code"},
		{"gh", "repos/list", "gh-repos-list"},
	} {
		if got := Normalize(c.ns, c.tool); got != c.want {
			t.Errorf("Normalize(%q, %q) = %q, want %q", c.ns, c.tool, got, c.want)
		}
	}
}

func TestDefinitionDigestCoversNameDescriptionSchemaAndAnnotations(t *testing.T) {
	base := func() *mcp.Tool {
		return &mcp.Tool{Name: "t", Description: "d", InputSchema: map[string]any{"type": "object"},
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}}
	}
	d0, err := DefinitionOf(base())
	if err != nil || !digestRE.MatchString(d0.Digest) {
		t.Fatalf("%+v %v", d0, err)
	}
	// The same definition written in another member order digests alike.
	same := base()
	same.InputSchema = map[string]any{"type": "object"}
	if d, _ := DefinitionOf(same); d.Digest != d0.Digest {
		t.Fatal("equal definitions digest differently")
	}
	for name, edit := range map[string]func(*mcp.Tool){
		"name":           func(x *mcp.Tool) { x.Name = "u" },
		"description":    func(x *mcp.Tool) { x.Description = "d " },
		"schema":         func(x *mcp.Tool) { x.InputSchema = map[string]any{"type": "object", "required": []any{"a"}} },
		"annotations":    func(x *mcp.Tool) { x.Annotations = &mcp.ToolAnnotations{ReadOnlyHint: false} },
		"no annotations": func(x *mcp.Tool) { x.Annotations = nil },
	} {
		x := base()
		edit(x)
		if d, _ := DefinitionOf(x); d.Digest == d0.Digest {
			t.Errorf("changing the %s keeps the digest", name)
		}
	}
	// annotations.title is part of the annotations a pin approves.
	x := base()
	x.Annotations.Title = "T"
	if d, _ := DefinitionOf(x); d.Digest == d0.Digest {
		t.Error("annotations.title is not covered")
	}
}

func TestSchemasWithExternalReferencesOrOfNonObjectsAreRefused(t *testing.T) {
	for name, s := range map[string]map[string]any{
		"file ref":   {"type": "object", "properties": map[string]any{"a": map[string]any{"$ref": "file:///etc/passwd"}}},
		"http ref":   {"type": "object", "properties": map[string]any{"a": map[string]any{"$ref": "http://127.0.0.1:1/x.json"}}},
		"not object": {"type": "string"},
		"bad schema": {"type": "object", "minProperties": "many"},
	} {
		if _, err := checkSchema("x", s); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for name, s := range map[string]map[string]any{
		"draft-07": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}},
		"2020-12":  {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"},
		"local ref": {"type": "object", "$defs": map[string]any{"s": map[string]any{"type": "string"}},
			"properties": map[string]any{"a": map[string]any{"$ref": "#/$defs/s"}}},
	} {
		if _, err := checkSchema("x", s); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestAnnotationsAbsentTakeTheCautiousMCPDefaults(t *testing.T) {
	a := annotationsOf(nil)
	if a.ReadOnly || !a.Destructive || a.Idempotent || !a.OpenWorld {
		t.Fatalf("defaults = %+v", a)
	}
	a = annotationsOf(map[string]any{"readOnlyHint": true, "destructiveHint": false, "openWorldHint": "no"})
	if !a.ReadOnly || a.Destructive || !a.OpenWorld {
		t.Fatalf("hints = %+v (a non-boolean hint counts as absent)", a)
	}
}

func TestLockRoundTripsAndRefusesBadDigests(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mcp.lock.json")
	l, err := ReadLock(path)
	if err != nil || len(l.Upstreams) != 0 {
		t.Fatalf("missing lock: %+v %v", l, err)
	}
	d, _ := DefinitionOf(&mcp.Tool{Name: "t", Description: "d", InputSchema: map[string]any{"type": "object"}})
	l.Set("notes", []Definition{d})
	if err := l.Write(path); err != nil {
		t.Fatal(err)
	}
	back, err := ReadLock(path)
	if err != nil || back.Pins("notes")["t"] != d.Digest || back.Pins("other") != nil {
		t.Fatalf("read back %+v %v", back, err)
	}
	b, _ := os.ReadFile(path)
	os.WriteFile(path, []byte(strings.Replace(string(b), d.Digest, "sha256:abc", 1)), 0o644)
	if _, err := ReadLock(path); err == nil {
		t.Fatal("a malformed digest was accepted")
	}
	os.WriteFile(path, []byte(`{"version":1,"upstreams":{},"extra":1}`), 0o644)
	if _, err := ReadLock(path); err == nil {
		t.Fatal("an unknown member was accepted")
	}
}

func TestIsErrorTextIsCappedAndOtherwiseTheToolFailed(t *testing.T) {
	u := &Upstream{o: Options{MaxResponseBytes: 100}}
	tool := &Tool{u: u, spec: specNamed("n-t")}
	long := strings.Repeat("é", 2000)
	_, err := tool.result(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: long[:90]}}})
	if err == nil || !strings.Contains(err.Error(), "é") {
		t.Fatalf("isError: %v", err)
	}
	if got := capText(long, MaxToolErrorBytes); len(got) > MaxToolErrorBytes || !strings.HasSuffix(got, "…") {
		t.Fatalf("cap: %d bytes", len(got))
	}
	// Control characters are not model-safe: "the tool failed".
	_, err = tool.result(&mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "a\x1b[2Jb"}}})
	if err == nil || strings.Contains(err.Error(), "\x1b") {
		t.Fatalf("unsafe isError: %v", err)
	}
	// Over the response limit.
	if _, err := tool.result(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", 101)}}}); err == nil {
		t.Fatal("an oversized result passed")
	}
	// Non-text content is described, not passed through.
	res, err := tool.result(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hi"}, &mcp.ImageContent{Data: []byte("x"), MIMEType: "image/png"}}})
	if err != nil || res.Content != "hi\n[1 non-text content item(s) omitted]" {
		t.Fatalf("mixed: %q %v", res.Content, err)
	}
}

func specNamed(n string) tools.Spec { return tools.Spec{Name: n} }
