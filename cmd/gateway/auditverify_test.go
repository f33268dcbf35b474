package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `gateway audit verify` checks an export of the gateway of before leaf
// versions (testdata written by that code), and fails at the line of an
// event whose leaf version it does not know, naming it.
func TestAuditVerifyReadsTheLeafVersion(t *testing.T) {
	dir := filepath.Join("..", "..", "internal", "audit", "testdata", "leafv1")
	cp, key := filepath.Join(dir, "checkpoint"), filepath.Join(dir, "verifier.key")
	run := func(export string) (int, string, string) {
		var out, errb bytes.Buffer
		code := auditVerify([]string{"--checkpoint", cp, "--key", key, export}, &out, &errb)
		return code, out.String(), errb.String()
	}
	if code, out, errs := run(filepath.Join(dir, "export.ndjson")); code != exitOK || !strings.HasPrefix(out, "ok: 3 events") {
		t.Fatalf("the export of before: exit %d\n%s%s", code, out, errs)
	}

	raw, err := os.ReadFile(filepath.Join(dir, "export.ndjson"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(raw), "\n")
	lines[1] = strings.Replace(lines[1], `{"id":"v1-2",`, `{"id":"v1-2","leaf_version":3,`, 1)
	relabelled := filepath.Join(t.TempDir(), "export.ndjson")
	if err := os.WriteFile(relabelled, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run(relabelled)
	if code != exitRuntime || !strings.Contains(errs, `line 2: event v1-2: unknown audit leaf version 3 of event "v1-2"`) {
		t.Fatalf("an event of leaf version 3: exit %d\n%s%s", code, out, errs)
	}
}
