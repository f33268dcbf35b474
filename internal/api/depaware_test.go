package api

import (
	"testing"

	"github.com/toolgate/toolgate/internal/archtest"
)

// The front door's module-internal dependencies, direct and transitive,
// are the checked-in depaware.txt: a change that makes it compile against
// another package shows as a line in depaware.txt's diff (update it with
// go test . -run Depaware -update). None is a store, an engine, the
// pipeline or the configuration, however indirectly.
func TestDepaware(t *testing.T) {
	archtest.Depaware(t, archtest.FrontDoorForbidden, "a front door compiles against internal/service alone")
}
