// Package archtest checks the layering of the code in tests: which
// packages a package's non-test source may import (ForbidImports), and
// which module packages it depends on at all, directly or transitively,
// against a checked-in list (Depaware, after Tailscale's depaware).
package archtest

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FrontDoorForbidden are the packages a front door (REST, MCP, console)
// must not import or depend on: it reaches the application only through
// internal/service, whose implementations (internal/service/backend) the
// gateway wires.
var FrontDoorForbidden = []string{
	"internal/pipeline", "internal/audit", "internal/decision", "internal/store", "internal/approval",
	"internal/idempotency", "internal/replay", "internal/invoke", "internal/prepare", "internal/tools",
	"internal/tlog", "internal/config",
}

// ForbidImports fails t for each import of a forbidden package (a module
// path suffix such as "internal/store", or a package below it) by the
// non-test Go files of the current folder; hint says what to do instead.
func ForbidImports(t testing.TB, forbidden []string, hint string) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden {
				if strings.HasSuffix(path, "/"+bad) || strings.Contains(path, "/"+bad+"/") {
					t.Errorf("%s imports %s: %s", name, path, hint)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no source file checked")
	}
}
