package api

import (
	"testing"

	"github.com/toolgate/toolgate/internal/archtest"
)

// The REST front door reaches the application only through
// internal/service: it imports no store, no engine and no pipeline stage,
// so a second front door calling the same services sees the same
// behaviour. A handler that took a shortcut to a store fails here.
func TestTheFrontDoorImportsNoStoreNoEngine(t *testing.T) {
	archtest.ForbidImports(t, archtest.FrontDoorForbidden, "call a service of internal/service instead")
}
