package prepare

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

// The digest computed by splicing call_id into the key's canonical bytes
// must be exactly the RFC 8785 digest of the whole document, wherever
// call_id sorts among the members.
func TestDigestAndKeyAgreeWithDigest(t *testing.T) {
	docs := []map[string]any{
		{"call_id": "c-1"},
		{"call_id": "c-1", "a": 1},
		{"call_id": "c-1", "z": 1},
		{"call_id": "c-1", "action": "fs.read", "args": map[string]any{"client": "x", "call_id": "nested"}, "client": map[string]any{"id": ""}},
		{"call_id": "c\"1\u2028", "calm": true, "call": false, "call_ie": nil, "ünï": "x", "\U0001F600": 1, "\uff61": 2},
		requestDocumentForTest("c-9"),
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		d := map[string]any{"call_id": fmt.Sprintf("id-%d", r.IntN(1000))}
		for range r.IntN(8) {
			name := string([]rune{rune('a' + r.IntN(26)), rune([]int{'a', 'l', 'z', 0xe9, 0x1F600}[r.IntN(5)])})
			d[name] = r.IntN(100)
		}
		docs = append(docs, d)
	}
	for i, doc := range docs {
		want, err := Digest(doc)
		if err != nil {
			t.Fatal(err)
		}
		got, key, err := digestAndKey(doc)
		if err != nil {
			t.Fatalf("doc %d: %v", i, err)
		}
		if got != want {
			t.Fatalf("doc %d %v: spliced digest %s, want %s", i, doc, got, want)
		}
		rest := maps.Clone(doc)
		delete(rest, "call_id")
		if wantKey, err := PolicyKey(rest); err != nil || key != wantKey {
			t.Fatalf("doc %d %v: key %x, want the canonical document without call_id %x (%v)", i, doc, key, wantKey, err)
		}
	}
}

// Two documents that differ only in call_id share a key; any other
// difference gives another key.
func TestPolicyKeyIgnoresOnlyCallID(t *testing.T) {
	a, b := requestDocumentForTest("c-1"), requestDocumentForTest("c-2")
	da, ka, _ := digestAndKey(a)
	db, kb, _ := digestAndKey(b)
	if da == db {
		t.Fatal("digests of different calls are equal")
	}
	if ka != kb {
		t.Fatal("keys of documents differing only in call_id differ")
	}
	c := requestDocumentForTest("c-1")
	c["session_id"] = "s-2"
	if _, kc, _ := digestAndKey(c); kc == ka {
		t.Fatal("a different session gave the same key")
	}
	d := requestDocumentForTest("c-1")
	d["args"].(map[string]any)["path"] = "docs/other.md"
	if _, kd, _ := digestAndKey(d); kd == ka {
		t.Fatal("different arguments gave the same key")
	}
	if _, _, err := digestAndKey(map[string]any{"x": 1}); err == nil {
		t.Fatal("a document without call_id was accepted")
	}
}

func requestDocumentForTest(callID string) map[string]any {
	return map[string]any{
		"version": 1, "tenant": "acme", "session_id": "s-1", "call_id": callID,
		"principal": map[string]any{"id": "alice", "roles": []any{"developer"}, "groups": []any{}, "claims": map[string]any{}},
		"client":    map[string]any{"id": ""},
		"tool":      map[string]any{"name": "read-file", "kind": "builtin"},
		"action":    "fs.read",
		"resources": []any{map[string]any{"type": "file", "path": "docs/guide.md", "access": "read"}},
		"args":      map[string]any{"path": "docs/guide.md"},
	}
}

func BenchmarkDigestAndKey(b *testing.B) {
	doc := requestDocumentForTest("c-1")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := digestAndKey(doc); err != nil {
			b.Fatal(err)
		}
	}
}
