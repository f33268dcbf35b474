package service

import (
	"testing"

	"github.com/toolgate/toolgate/internal/archtest"
)

// The front doors compile against this package, so it compiles against
// no store, engine, pipeline or configuration: its dependencies are the
// checked-in depaware.txt (update it with go test . -run Depaware
// -update). The implementations live in internal/service/backend.
func TestDepaware(t *testing.T) {
	archtest.Depaware(t, archtest.FrontDoorForbidden, "the services' contract imports none of what implements it")
}
