package mcpserver

import (
	"testing"

	"github.com/toolgate/toolgate/internal/archtest"
)

// The MCP front door reaches the application only through
// internal/service, as the REST front door does: it imports no store, no
// engine and no pipeline stage, so both doors show the same
// behaviour. A handler that took a shortcut to a store fails here.
func TestTheFrontDoorImportsNoStoreNoEngine(t *testing.T) {
	archtest.ForbidImports(t, archtest.FrontDoorForbidden, "call a service of internal/service instead")
}
