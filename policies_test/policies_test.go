// Package policies_test runs the Rego unit tests of the default policy pack
// (../policies) under go test, with the same runner as `gateway policy test`,
// and keeps every Rego file `opa fmt`-formatted.
package policies_test

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/format"

	"github.com/toolgate/toolgate/internal/decision"
)

// packDirs are the pack and its tests, as `gateway policy test` loads them.
var packDirs = []string{"../policies", "."}

func TestRegoTestsPassWithFullCoverage(t *testing.T) {
	var out bytes.Buffer
	passed, err := decision.RunTests(context.Background(), packDirs, &out,
		decision.TestOptions{Verbose: testing.Verbose(), Coverage: true, Threshold: 100})
	t.Log("\n" + out.String())
	if err != nil {
		t.Fatalf("load or compile: %v", err)
	}
	if !passed {
		t.Fatal("Rego tests failed or the pack is not fully covered (see the log above)")
	}
}

func TestPackPassesPolicyCheck(t *testing.T) {
	problems, err := decision.Check(context.Background(), "../policies")
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Fatalf("gateway policy check would fail:\n%s", decision.FormatProblems(problems))
	}
}

func TestRegoFilesAreFormatted(t *testing.T) {
	for _, dir := range packDirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".rego") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			formatted, err := format.SourceWithOpts(path, src, format.Opts{RegoVersion: ast.RegoV1})
			if err != nil {
				t.Errorf("%s: %v", path, err)
				return nil
			}
			if !bytes.Equal(src, formatted) {
				t.Errorf("%s is not formatted: run `opa fmt -w %s`", path, path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
