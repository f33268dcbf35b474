package audit_test

import (
	"errors"
	"reflect"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/toolgate/toolgate/internal/audit"
)

func canon(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	jv := jsontext.Value(b)
	if err := jv.Canonicalize(); err != nil {
		t.Fatal(err)
	}
	return string(jv)
}

func requestDoc() map[string]any {
	return map[string]any{
		"version":   1,
		"principal": map[string]any{"id": "alice", "roles": []any{"dev"}},
		"args":      map[string]any{"path": "notes.txt", "content": "hunter2", "a/b": "slash", "c~d": "tilde"},
		"resources": []any{
			map[string]any{"type": "file", "path": "secrets/db.env"},
			map[string]any{"type": "file", "path": "docs/a.md"},
		},
	}
}

func TestMask(t *testing.T) {
	m := audit.MaskedValue
	tests := []struct {
		name     string
		pointers []string
		want     map[string]any
	}{
		{"no pointers", nil, requestDoc()},
		{"object member", []string{"/args/content"}, map[string]any{
			"version": 1, "principal": map[string]any{"id": "alice", "roles": []any{"dev"}},
			"args":      map[string]any{"path": "notes.txt", "content": m, "a/b": "slash", "c~d": "tilde"},
			"resources": requestDoc()["resources"],
		}},
		{"array element member", []string{"/resources/0/path"}, map[string]any{
			"version": 1, "principal": map[string]any{"id": "alice", "roles": []any{"dev"}},
			"args": requestDoc()["args"],
			"resources": []any{
				map[string]any{"type": "file", "path": m},
				map[string]any{"type": "file", "path": "docs/a.md"},
			},
		}},
		{"escaped tokens", []string{"/args/a~1b", "/args/c~0d"}, map[string]any{
			"version": 1, "principal": map[string]any{"id": "alice", "roles": []any{"dev"}},
			"args":      map[string]any{"path": "notes.txt", "content": "hunter2", "a/b": m, "c~d": m},
			"resources": requestDoc()["resources"],
		}},
		{"whole subtree, deeper pointer is moot", []string{"/args/content", "/args"}, map[string]any{
			"version": 1, "principal": map[string]any{"id": "alice", "roles": []any{"dev"}},
			"args": m, "resources": requestDoc()["resources"],
		}},
		{"missing and invalid pointers are ignored", []string{
			"/nope", "/args/missing", "/args/content/deeper", "/resources/5/path", "/resources/-/path",
			"/resources/01/path", "/resources/x/path", "args/content", "/args/~2",
		}, requestDoc()},
		{"empty pointer masks every top-level value", []string{""}, map[string]any{
			"version": m, "principal": m, "args": m, "resources": m,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := requestDoc()
			before := canon(t, doc)
			got := audit.Mask(doc, tc.pointers)
			if a, b := canon(t, got), canon(t, tc.want); a != b {
				t.Fatalf("Mask = %s\nwant %s", a, b)
			}
			if canon(t, doc) != before {
				t.Fatal("Mask modified its input")
			}
		})
	}
}

func TestMaskCopiesOnlyMaskedPaths(t *testing.T) {
	doc := requestDoc()
	got := audit.Mask(doc, []string{"/args/content"})
	same := func(a, b any) bool { return reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer() }
	if !same(got["principal"], doc["principal"]) || !same(got["resources"], doc["resources"]) {
		t.Fatal("untouched branches were copied")
	}
	if same(got["args"], doc["args"]) {
		t.Fatal("the masked branch shares its map with the input")
	}
	if audit.Mask(nil, []string{"/a"}) != nil {
		t.Fatal("Mask(nil) is not nil")
	}
}

func TestMaskGoesThroughTypedValues(t *testing.T) {
	type res struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	}
	doc := map[string]any{
		"roles":     []string{"dev", "secret-role"},
		"resources": []res{{Path: "secrets/db.env", Kind: "file"}},
		"headers":   map[string]string{"authorization": "Bearer x", "accept": "*/*"},
		"opaque":    map[string]chan int{"c": nil}, // no JSON form
	}
	got := audit.Mask(doc, []string{"/roles/1", "/resources/0/path", "/headers/authorization", "/opaque/c"})
	want := map[string]any{
		"roles":     []any{"dev", audit.MaskedValue},
		"resources": []any{map[string]any{"path": audit.MaskedValue, "kind": "file"}},
		"headers":   map[string]any{"authorization": audit.MaskedValue, "accept": "*/*"},
		"opaque":    audit.MaskedValue, // masked whole rather than leaked
	}
	if a, b := canon(t, got), canon(t, want); a != b {
		t.Fatalf("Mask = %s\nwant %s", a, b)
	}
	if doc["roles"].([]string)[1] != "secret-role" {
		t.Fatal("Mask modified a typed input value")
	}
}

func TestCheckPointers(t *testing.T) {
	if err := audit.CheckPointers([]string{"", "/a", "/a/0", "/a~0~1", "/"}); err != nil {
		t.Fatalf("valid pointers reported: %v", err)
	}
	err := audit.CheckPointers([]string{"/ok", "no-slash", "/bad~2", "/trailing~"})
	var pe *audit.PointerError
	if !errors.As(err, &pe) || pe.Pointer != "no-slash" {
		t.Fatalf("CheckPointers = %v, want a *PointerError for the first invalid pointer", err)
	}
	if n := len(err.(interface{ Unwrap() []error }).Unwrap()); n != 3 {
		t.Fatalf("CheckPointers reported %d invalid pointers, want 3", n)
	}
}
