package archtest

import (
	"slices"
	"testing"
)

// Deps lists the package itself and only the module's packages: archtest
// imports nothing of the module, and the standard library is left out.
func TestDepsListsOnlyModulePackages(t *testing.T) {
	if got := Deps(t); !slices.Equal(got, []string{"internal/archtest"}) {
		t.Errorf("Deps = %v, want [internal/archtest]", got)
	}
}
