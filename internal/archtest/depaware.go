package archtest

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Module is the module whose packages a depaware list holds.
const Module = "github.com/toolgate/toolgate"

// DepawareFile is the checked-in list of a package's module-internal
// dependencies, direct and transitive, in the package's folder.
const DepawareFile = "depaware.txt"

var update = flag.Bool("update", false, "rewrite "+DepawareFile+" from go list -deps")

// Deps is the module-internal packages `go list -deps` lists for the
// package in the current folder (itself included), sorted, as paths
// relative to the module ("internal/service").
func Deps(t testing.TB) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, stderr.String())
	}
	var deps []string
	for _, p := range strings.Fields(string(out)) {
		if rel, ok := strings.CutPrefix(p, Module+"/"); ok {
			deps = append(deps, rel)
		}
	}
	slices.Sort(deps)
	return deps
}

// Depaware fails t when the package's module-internal dependencies (Deps)
// differ from its DepawareFile, printing the difference and how to
// accept it; with -update it rewrites the file instead. A dependency a
// change adds is then a line in the change's diff, seen in review. It
// also fails for each forbidden package (as ForbidImports matches them)
// among the dependencies, whatever the file says.
func Depaware(t *testing.T, forbidden []string, hint string) {
	t.Helper()
	deps := Deps(t)
	for _, d := range deps {
		for _, bad := range forbidden {
			if d == bad || strings.HasPrefix(d, bad+"/") {
				t.Errorf("the package depends on %s, transitively: %s (find the import that brings it: go list -deps -f '{{.ImportPath}}: {{.Imports}}' . | grep %s)", d, hint, bad)
			}
		}
	}
	want := strings.Join(deps, "\n") + "\n"
	if *update {
		if err := os.WriteFile(DepawareFile, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(DepawareFile)
	if err != nil {
		t.Fatalf("%v: create it with go test . -run Depaware -update", err)
	}
	have := strings.Fields(string(b))
	var added, removed []string
	for _, d := range deps {
		if !slices.Contains(have, d) {
			added = append(added, "+ "+d)
		}
	}
	for _, d := range have {
		if !slices.Contains(deps, d) {
			removed = append(removed, "- "+d)
		}
	}
	if len(added)+len(removed) > 0 || string(b) != want {
		t.Errorf("the package's module-internal dependencies differ from %s:\n%s\n"+
			"If the change is intended, update the list with: go test . -run Depaware -update (in the package's folder)",
			DepawareFile, strings.Join(append(added, removed...), "\n"))
	}
}
