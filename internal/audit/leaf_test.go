package audit

import "testing"

// The leaf of an event is its hash whatever log_index it carries, and any
// other change of content changes it.
func TestLeafHashIgnoresOnlyTheLogIndex(t *testing.T) {
	base := `{"id":"e1","tenant":"acme","seq":0,"hash":"sha256:x"}`
	want, err := ComputeHash([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	for _, raw := range []string{base, `{"log_index":7,"id":"e1","tenant":"acme","seq":0,"hash":"sha256:y"}`, `{"id":"e1","tenant":"acme","log_index":0,"seq":0}`} {
		got, err := LeafHash([]byte(raw))
		if err != nil || got != want {
			t.Errorf("LeafHash(%s) = %s, %v; want %s", raw, got, err, want)
		}
	}
	for _, raw := range []string{`{"id":"e1","tenant":"globex","seq":0}`, `{"id":"e1","tenant":"acme","seq":1}`, `{"id":"e1","tenant":"acme","seq":0,"log_index_":1}`} {
		if got, _ := LeafHash([]byte(raw)); got == want {
			t.Errorf("LeafHash(%s) did not change", raw)
		}
	}
	if _, err := LeafHash([]byte(`[1]`)); err == nil {
		t.Error("an array hashed")
	}
}
