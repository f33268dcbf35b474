// Package sdk_test checks that the SDKs (every package under sdk/) and
// all they import stay outside the gateway's internal packages, so that a
// service or platform that imports them compiles none of the gateway and
// is not broken by its refactors. The contract they share with the
// gateway lives in api/ (api/v1, api/upstream/v1).
package sdk_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/toolgate/toolgate"

// allowedTestImports are the internal packages SDK tests may import,
// by the package whose tests import them: sdk/client's tests start a
// real in-process gateway (config.Load, gateway.New, auth.MintHS256 for
// callers' tokens, tlog to check proofs independently of the client).
// Each entry must still be needed.
var allowedTestImports = map[string][]string{
	module + "/sdk/client": {
		module + "/internal/auth", module + "/internal/config", module + "/internal/gateway", module + "/internal/tlog",
	},
}

type edge struct{ from, to string }

// internalImports lists `go list -deps` of ./... (with the tests' packages
// when tests) from this folder, and returns every import of an internal
// package by a package of the module that is not internal itself: the SDK
// packages, and what of the module they reach (api/...).
func internalImports(t *testing.T, tests bool) (edges []edge, all []string) {
	t.Helper()
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	args := []string{"list", "-deps", "-f", "{{.ImportPath}}|{{.Dir}}|{{join .Imports \" \"}}"}
	if tests {
		args = append(args, "-test")
	}
	cmd := exec.Command(goTool, append(args, "./...")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	dirs := map[string]bool{}
	for line := range strings.Lines(string(out)) {
		path, rest, _ := strings.Cut(strings.TrimSpace(line), "|")
		dir, imports, _ := strings.Cut(rest, "|")
		all = append(all, path)
		if strings.HasPrefix(path, module+"/") {
			dirs[dir] = true
		}
		pkg, _, _ := strings.Cut(path, " ") // "p [p.test]" is p's test variant
		pkg = strings.TrimSuffix(strings.TrimSuffix(pkg, ".test"), "_test")
		if !strings.HasPrefix(pkg, module+"/") || isInternal(pkg) {
			continue
		}
		for _, imp := range strings.Fields(imports) {
			if isInternal(imp) {
				edges = append(edges, edge{pkg, imp})
			}
		}
	}
	if len(all) == 0 {
		t.Fatal("go list listed nothing")
	}
	readSources(t, dirs)
	return edges, all
}

// readSources reads the module's folders and Go files that go list
// looked at. go test caches a passing result keyed by the files the test
// itself opened; the go list child's reads do not count, so without this
// a cached pass would hide an import planted later.
func readSources(t *testing.T, dirs map[string]bool) {
	t.Helper()
	if _, err := os.ReadFile(filepath.Join("..", "go.mod")); err != nil {
		t.Fatal(err)
	}
	for dir := range dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".go") {
				if _, err := os.ReadFile(filepath.Join(dir, e.Name())); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func isInternal(pkg string) bool {
	p, _, _ := strings.Cut(pkg, " ")
	return strings.HasPrefix(p, module+"/internal/") || p == module+"/internal"
}

func TestSDKImportsNothingInternal(t *testing.T) {
	edges, all := internalImports(t, false)
	for _, e := range edges {
		t.Errorf("%s imports %s: the SDK must not depend on the gateway's internal packages (put the shared contract in api/)", e.from, e.to)
	}
	for _, p := range all {
		if isInternal(p) {
			t.Errorf("the SDK's dependencies include %s", p)
		}
	}
}

func TestSDKTestsImportNothingInternalButTheGateway(t *testing.T) {
	edges, _ := internalImports(t, true)
	used := map[edge]bool{}
	for _, e := range edges {
		if slices.Contains(allowedTestImports[e.from], e.to) {
			used[e] = true
			continue
		}
		t.Errorf("%s (or its tests) imports %s: SDK tests may import internal packages only as allowedTestImports says", e.from, e.to)
	}
	for from, tos := range allowedTestImports {
		for _, to := range tos {
			if !used[edge{from, to}] {
				t.Errorf("the tests of %s no longer import %s: remove the exception from allowedTestImports", from, to)
			}
		}
	}
}
