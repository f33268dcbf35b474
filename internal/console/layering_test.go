package console

import (
	"testing"

	"github.com/toolgate/toolgate/internal/archtest"
)

// The console reaches the application only through internal/service, as
// the REST and MCP front doors do: it imports no store, no engine and no
// pipeline stage, so a page shows and does exactly what the same
// credential could through the API. A page that took a shortcut to a
// store fails here.
func TestTheFrontDoorImportsNoStoreNoEngine(t *testing.T) {
	archtest.ForbidImports(t, archtest.FrontDoorForbidden, "call a service of internal/service instead")
}
