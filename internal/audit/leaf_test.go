package audit

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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

// LeafHash reads the leaf version before hashing: an unknown one is
// refused, naming the event, not hashed by a rule that may not be its own.
func TestLeafHashRefusesAnUnknownLeafVersion(t *testing.T) {
	for _, raw := range []string{
		`{"id":"e1","tenant":"acme","leaf_version":3,"hash":"sha256:x"}`,
		`{"id":"e1","tenant":"acme","leaf_version":"2","log_index":1}`,
	} {
		if h, err := LeafHash([]byte(raw)); !errors.Is(err, ErrUnknownLeafVersion) || !strings.Contains(err.Error(), `"e1"`) {
			t.Errorf("LeafHash(%s) = %s, %v; want ErrUnknownLeafVersion naming e1", raw, h, err)
		}
		if h, err := ComputeHash([]byte(raw)); !errors.Is(err, ErrUnknownLeafVersion) {
			t.Errorf("ComputeHash(%s) = %s, %v; want ErrUnknownLeafVersion", raw, h, err)
		}
	}
	for _, raw := range []string{`{"id":"e1"}`, `{"id":"e1","leaf_version":1}`, `{"id":"e1","leaf_version":2}`} {
		if _, err := LeafHash([]byte(raw)); err != nil {
			t.Errorf("LeafHash(%s): %v", raw, err)
		}
	}
}

// testdata/leafv1 is an export, its signed checkpoint and the verifier
// key, written by the gateway of before leaf versions (events of version
// 1, without the member). They still verify offline.
func TestExportOfBeforeLeafVersionsStillVerifies(t *testing.T) {
	dir := filepath.Join("testdata", "leafv1")
	export, err := os.ReadFile(filepath.Join(dir, "export.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	note, err := os.ReadFile(filepath.Join(dir, "checkpoint"))
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(filepath.Join(dir, "verifier.key"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(export, []byte("leaf_version")) {
		t.Fatal("the export of before has leaf_version members")
	}
	cp, n, err := VerifyExport(bytes.NewReader(export), note, []string{strings.TrimSpace(string(key))})
	if err != nil || n != 3 || cp.Size != 3 {
		t.Fatalf("VerifyExport = size %d, %d events, %v; want the 3 events of the checkpoint", cp.Size, n, err)
	}
	// And it is checked, not waved through: one changed byte fails it.
	bad := bytes.Replace(export, []byte(`"principal":"alice"`), []byte(`"principal":"alicf"`), 1)
	if _, _, err := VerifyExport(bytes.NewReader(bad), note, []string{strings.TrimSpace(string(key))}); err == nil {
		t.Fatal("a changed export of before verified")
	}
}
