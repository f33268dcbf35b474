// Package policies_test runs the Rego unit tests of the default policy pack
// (../policies) under go test, with the same runner as `gateway policy test`,
// checks that none of them makes a built-in function fail, and keeps every
// Rego file `opa fmt`-formatted.
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
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/tester"

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

// TestRegoTestsRaiseNoBuiltinErrors runs the Rego tests again with built-in
// errors reported. The gateway evaluates with strict built-in errors, where
// one failing call (concat of a non-string, glob.match of a number, …)
// fails the whole decision closed with a 503; the ordinary run treats it as
// undefined and can pass. Every request document of the tests, malformed
// ones included, must evaluate without one.
func TestRegoTestsRaiseNoBuiltinErrors(t *testing.T) {
	ctx := context.Background()
	modules, store, err := tester.LoadWithParserOptions(packDirs, packFiles, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		t.Fatal(err)
	}
	txn, err := store.NewTransaction(ctx, storage.WriteParams)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Abort(ctx, txn)
	runner := tester.NewRunner().
		SetCompiler(ast.NewCompiler().WithStrict(true).WithDefaultRegoVersion(ast.RegoV1)).
		SetStore(store).
		SetModules(modules).
		RaiseBuiltinErrors(true)
	results, err := runner.RunTests(ctx, txn)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for r := range results {
		ran++
		if r.Error != nil {
			t.Errorf("%s.%s: %v", r.Package, r.Name, r.Error)
		}
	}
	if ran == 0 {
		t.Fatal("no Rego tests ran")
	}
}

// packFiles is the loader filter of `gateway policy test`: Rego modules and
// data files, no hidden files.
func packFiles(_ string, info fs.FileInfo, depth int) bool {
	name := info.Name()
	switch {
	case depth == 0:
		return false
	case strings.HasPrefix(name, "."):
		return true
	case info.IsDir(), strings.HasSuffix(name, ".rego"):
		return false
	}
	return name != "data.json" && name != "data.yaml" && name != "data.yml"
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
