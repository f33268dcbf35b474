package v1_test

import (
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// The contract package is imported by services that must not compile the
// gateway: it depends on the standard library and golang-jwt only.
func TestDependsOnTheStandardLibraryAndGolangJWTOnly(t *testing.T) {
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "list", "-deps",
		"-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		switch p {
		case "github.com/toolgate/toolgate/api/upstream/v1", "github.com/golang-jwt/jwt/v5":
		default:
			t.Errorf("api/upstream/v1 depends on %s", p)
		}
	}
}
