package mcpserver

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The MCP front door reaches the application only through
// internal/service, as the REST front door does: it imports no store, no
// engine and no pipeline stage, so both doors show the same
// behaviour. A handler that took a shortcut to a store fails here.
func TestTheFrontDoorImportsNoStoreNoEngine(t *testing.T) {
	forbidden := []string{
		"internal/pipeline", "internal/audit", "internal/decision", "internal/store", "internal/approval",
		"internal/idempotency", "internal/replay", "internal/invoke", "internal/prepare", "internal/tools",
		"internal/tlog", "internal/config",
	}
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
					t.Errorf("%s imports %s: call a service of internal/service instead", name, path)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no source file checked")
	}
}
