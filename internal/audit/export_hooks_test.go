package audit

// Hooks for the external tests that need a real store (internal/store
// imports this package, so only an external test can import it).

// ExportPaged is export with a page size of the test's choosing.
var ExportPaged = export

// ExportFixture and ExportEpoch are the events the export tests walk.
var (
	ExportFixture = exportFixture
	ExportEpoch   = exportEpoch
)
